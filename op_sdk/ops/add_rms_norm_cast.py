"""npu_add_rms_norm_cast: add_rms_norm with the output in fp32 and in x1's dtype.

Native CPU kernel: csrc/add_rms_norm_cast.cpp (over kernels/rms_norm.h).
"""

from __future__ import annotations

import torch

from op_sdk.composite import Composite, Spelling, same
from op_sdk.library import Benchmark, define_op
from op_sdk.npu.binding import AclnnBinding
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


def _to(t, dtype):
    return t.to(dtype)


def _npu_dtype_cast(t, dtype):
    return torch.ops.npu._npu_dtype_cast.default(t, dtype)


def _rows(t):
    return t.view(-1, t.size(-1))


def _unfused_spelling(x1, x2, gamma, epsilon=1e-6, *, cast=_to, view=same):
    """What the fused operator replaces: npu_add_rms_norm, then y cast to float32 (y1);
    y itself is y2. The steps: the cast (``npu._npu_dtype_cast``, torch_npu's lowering
    of ``.to()``, or ``.to()``) and a (-1, h) view of y before it, which the
    replacement applies to y1."""
    y, _, x_out = torch.ops.npu.npu_add_rms_norm.default(x1, x2, gamma, epsilon)
    return cast(view(y), torch.float32), y, None, x_out


npu_add_rms_norm_cast = define_op(
    "npu_add_rms_norm_cast(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor, Tensor)",
    aclnn=AclnnBinding("aclnnAddRmsNormCast", outputs=("y1", "y2", "rstd", "x")),
    reference=add_rms_norm_cast_reference, fake=add_rms_norm_cast_fake, native=("cpu",),
    doc="(y1 fp32, y2 = y1 in x1.dtype, rstd, x) of add_rms_norm; fp16/bf16 inputs.",
    benchmarks=(Benchmark(lambda t, h, dt: (bench_norm_inputs(t, h, dt), {}), _unfused,
                          "add + npu_rms_norm(fp32) + cast"),),
    composite=Composite(_unfused_spelling, outputs=("y1", "y2", "rstd", "x_out"),
                        optional_outputs=("x_out",), defaults=("epsilon",),
                        spellings={"cast": {"npu_dtype_cast": _npu_dtype_cast, "to": _to},
                                   "view": {"view": Spelling(_rows, outputs={"y1": _rows}),
                                            "": same}}),
)
