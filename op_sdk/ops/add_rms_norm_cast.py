"""npu_add_rms_norm_cast: add_rms_norm with the output in fp32 and in x1's dtype.

Native CPU kernel: csrc/add_rms_norm_cast.cpp (over kernels/rms_norm.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.ops._common import HALF_DTYPES, bench_norm_inputs
from op_sdk.ops._norm import _normalize, check_add_rms_norm, rstd_shape


def add_rms_norm_cast_reference(x1, x2, gamma, epsilon=1e-6):
    check_add_rms_norm("npu_add_rms_norm_cast", x1, x2, gamma, dtypes=HALF_DTYPES)
    x = x1.float() + x2.float()
    y, rstd = _normalize(x, gamma, epsilon)
    return y, y.to(x1.dtype), rstd, x.to(x1.dtype)


def add_rms_norm_cast_fake(x1, x2, gamma, epsilon=1e-6):
    check_add_rms_norm("npu_add_rms_norm_cast", x1, x2, gamma, dtypes=HALF_DTYPES)
    rstd = x1.new_empty(rstd_shape(x1, gamma), dtype=torch.float32)
    return (torch.empty_like(x1, dtype=torch.float32), torch.empty_like(x1), rstd,
            torch.empty_like(x1))



def _unfused(x1, x2, gamma, epsilon=1e-6):
    """add, npu_rms_norm in fp32, a cast back."""
    x = x1 + x2
    y1, rstd = torch.ops.npu.npu_rms_norm(x.float(), gamma.float(), epsilon)
    return y1, y1.to(x1.dtype), rstd, x


npu_add_rms_norm_cast = define_op(
    "npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    reference=add_rms_norm_cast_reference, fake=add_rms_norm_cast_fake, native=("cpu",),
    doc="(y1 fp32, y2 = y1 in x1.dtype, rstd, x) of add_rms_norm; fp16/bf16 inputs.",
    benchmarks=(Benchmark(lambda t, h, dt: (bench_norm_inputs(t, h, dt), {}), _unfused,
                          "add + npu_rms_norm(fp32) + cast"),),
)
