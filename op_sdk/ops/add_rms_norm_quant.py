"""npu_add_rms_norm_quant: add + rms_norm (+ beta) + static quantisation.

Native CPU kernel: csrc/add_rms_norm_quant.cpp (over kernels/norm_quant.h).
"""

from __future__ import annotations

import torch

from op_sdk.composite import Composite
from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import (
    INT8,
    QINT8,
    bench_norm_inputs,
    check,
    dtype_arg,
    quantize_round,
)
from op_sdk.ops._formats import HIFLOAT8, quantize_float8, storage_dtype
from op_sdk.ops._norm import _normalize, check_add_rms_norm


# The dtype table of Ascend 950 (aclnnAddRmsNormQuant / V2): x (x1, x2, gamma, beta) ->
# allowed (scales, zero points) dtype pairs; scales2 / zero_points2 take scales1's /
# zero_points1's dtypes. Atlas A2 / A3 accept the (fp16, fp32, int32) and all-bf16 rows.
ARQ_DTYPES = {
    torch.float16: ((torch.float32, torch.int32), (torch.float16, torch.float16),
                    (torch.float32, torch.float32)),
    torch.bfloat16: ((torch.float32, torch.int32), (torch.bfloat16, torch.bfloat16),
                     (torch.float32, torch.float32)),
    torch.float32: ((torch.float32, torch.float32),),
}
ARQ_DST = (INT8, QINT8, 23, 24, HIFLOAT8, 291, 292)


def _arq_table(x_dtype) -> str:
    return "; ".join(f"{str(s).replace('torch.', '')} scales with {str(z).replace('torch.', '')} "
                     "zero points" for s, z in ARQ_DTYPES[x_dtype])


def check_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1, beta, scales2,
                             zero_points2, axis, dst_type) -> int:
    """The shape / dtype rules; returns the dst_type code."""
    op = "npu_add_rms_norm_quant"
    check_add_rms_norm(op, x1, x2, gamma)
    check(axis == -1, op, "axis", f"must be -1, got {axis}")
    code = dtype_arg(op, "dst_type", dst_type, ARQ_DST, INT8)
    rows = ARQ_DTYPES[x1.dtype]
    for name, t in (("scales1", scales1), ("zero_points1", zero_points1),
                    ("scales2", scales2), ("zero_points2", zero_points2)):
        if t is not None:
            check(t.shape == gamma.shape, op, name,
                  f"must have gamma's shape {list(gamma.shape)}, got {list(t.shape)}")
    check(scales1.dtype in {s for s, _ in rows}, op, "scales1",
          f"must have a dtype {x1.dtype} x1 takes ({_arq_table(x1.dtype)}), got {scales1.dtype}")
    if zero_points1 is not None:
        check((scales1.dtype, zero_points1.dtype) in rows, op, "zero_points1",
              f"must have a dtype {x1.dtype} x1 takes ({_arq_table(x1.dtype)}), got "
              f"{scales1.dtype} scales with {zero_points1.dtype} zero points")
    if scales2 is not None:
        check(scales2.dtype == scales1.dtype, op, "scales2",
              f"must have scales1's dtype {scales1.dtype}, got {scales2.dtype}")
    if zero_points2 is not None:
        check(scales2 is not None, op, "zero_points2", "requires scales2")
        check((scales2.dtype, zero_points2.dtype) in rows
              and (zero_points1 is None or zero_points2.dtype == zero_points1.dtype), op,
              "zero_points2", f"must have zero_points1's dtype and one {x1.dtype} x1 takes "
              f"({_arq_table(x1.dtype)}), got {zero_points2.dtype}")
    if beta is not None:
        check(beta.shape == gamma.shape and beta.dtype == gamma.dtype, op, "beta",
              f"must have gamma's shape and dtype ({list(gamma.shape)}, {gamma.dtype}), got "
              f"({list(beta.shape)}, {beta.dtype})")
    return code


def _static_quant(y, scales, zero_points, div_mode, code):
    v = y / scales.float() if div_mode else y * scales.float()
    if zero_points is not None:
        v = v + zero_points.float()
    if code in (INT8, QINT8):
        return quantize_round(v, -128.0, 127.0, torch.int8)
    return quantize_float8(v, code)


def add_rms_norm_quant_reference(x1, x2, gamma, scales1, zero_points1, beta=None, scales2=None,
                                 zero_points2=None, *, axis=-1, epsilon=1e-6, div_mode=True,
                                 dst_type=None):
    code = check_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1, beta, scales2,
                                    zero_points2, axis, dst_type)
    # contiguous: the reductions sum in one order whatever x1's strides, and the outputs are
    # contiguous, as the fake (torch_npu's Meta) allocates them
    x = (x1.float() + x2.float()).contiguous()
    y, _ = _normalize(x, gamma, epsilon)
    if beta is not None:
        y = y + beta.float()
    y1 = _static_quant(y, scales1, zero_points1, div_mode, code)
    # y2 is always allocated; all zeros without scales2 (the contract's choice)
    y2 = (_static_quant(y, scales2, zero_points2, div_mode, code) if scales2 is not None
          else torch.zeros_like(y1))
    return y1, y2, x.to(x1.dtype)


def _arq_out_dtype(code: int) -> torch.dtype:
    return torch.int8 if code in (INT8, QINT8) else storage_dtype(code)


def add_rms_norm_quant_fake(x1, x2, gamma, scales1, zero_points1, beta=None, scales2=None,
                            zero_points2=None, *, axis=-1, epsilon=1e-6, div_mode=True,
                            dst_type=None):
    code = check_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1, beta, scales2,
                                    zero_points2, axis, dst_type)
    return _arq_outputs(x1, code)


def _arq_outputs(x1, code):
    """y1, y2, x as the fake allocates them: contiguous whatever x1's layout, as torch_npu's
    Meta allocates them."""
    y = x1.new_empty(x1.shape, dtype=_arq_out_dtype(code))
    return y, torch.empty_like(y), x1.new_empty(x1.shape)


def _bench_inputs(t, h, dt):
    """x1, x2, gamma, scales1, zero_points1: fp32 + int32 scales with fp16, bf16 else."""
    if dt == torch.float16:
        scales = torch.rand(h) * 0.05 + 0.01, torch.randint(-4, 4, (h,), dtype=torch.int32)
    else:
        scales = (torch.rand(h) * 0.05 + 0.01).to(dt), torch.randint(-4, 4, (h,)).to(dt)
    return bench_norm_inputs(t, h, dt) + scales, {}


def _unfused(x1, x2, gamma, scales1, zero_points1, **kw):
    y, _, x = torch.ops.npu.npu_add_rms_norm(x1, x2, gamma)
    return torch.ops.npu.npu_quantize(y, scales1, zero_points1, torch.qint8, -1, True), x


def _unfused_spelling(x1, x2, gamma, scales1, zero_points1, beta=None, axis=-1, epsilon=1e-6):
    """What the fused operator replaces (its first branch, int8 along the last axis):
    npu_add_rms_norm, (the bias added: beta, where a fusion makes it a pattern input,
    vllm-ascend's AddRMSNormQuantWithBias), then npu_quantize(y, scales1, zero_points1, int8,
    axis, div_mode)."""
    y, _, x_out = torch.ops.npu.npu_add_rms_norm.default(x1, x2, gamma, epsilon)
    if beta is not None:
        y = y + beta
    y1 = torch.ops.npu.npu_quantize.default(y, scales1, zero_points1, INT8, axis, True)
    return y1, None, x_out



def add_rms_norm_quant_cuda(x1, x2, gamma, scales1, zero_points1, beta=None, scales2=None,
                            zero_points2=None, *, axis=-1, epsilon=1e-6, div_mode=True,
                            dst_type=None):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/norm.py) for int8, float8 and HiFloat8
    outputs; empty rows and rows longer than its MAX_ROW run the reference."""
    from op_sdk.triton_kernels import norm

    args = (x1, x2, gamma, scales1, zero_points1, beta, scales2, zero_points2)
    kw = {"axis": axis, "epsilon": epsilon, "div_mode": div_mode, "dst_type": dst_type}
    code = check_add_rms_norm_quant(*args, axis, dst_type)
    if code not in norm.DST or not norm.fits(gamma.numel()):
        return add_rms_norm_quant_reference(*args, **kw)
    outs = _arq_outputs(x1, code)
    if scales2 is None:
        outs[1].zero_()  # y2 is all zeros without scales2 (the contract)
    return norm.run(outs, x1, gamma.numel(), x2=x2, gamma=gamma, beta=beta, xo=2, quant=1,
                    s1=scales1, z1=zero_points1, q1=0, s2=scales2, z2=zero_points2,
                    q2=None if scales2 is None else 1, div_mode=div_mode,
                    dst=norm.DST[code], eps=epsilon)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnAddRmsNormQuant",
                   "const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, "
                   "const aclTensor* scales1, const aclTensor* scales2Optional, "
                   "const aclTensor* zeroPoints1Optional, const aclTensor* zeroPoints2Optional, "
                   "int64_t axis, double epsilon, bool divMode, const aclTensor* y1Out, "
                   "const aclTensor* y2Out, const aclTensor* xOut",
                   prototypes.CANN_HEADERS + "aclnn_add_rms_norm_quant.h")


npu_add_rms_norm_quant = define_op(
    "npu_add_rms_norm_quant(Tensor x1, Tensor x2, Tensor gamma, Tensor scales1, "
    "Tensor? zero_points1, Tensor? beta=None, Tensor? scales2=None, Tensor? zero_points2=None, "
    "*, int axis=-1, float epsilon=1e-06, bool div_mode=True, int? dst_type=None) "
    "-> (Tensor, Tensor, Tensor)",
    # CANN 8.1.RC1's aclnnAddRmsNormQuant has no beta and writes int8
    aclnn=AclnnBinding("aclnnAddRmsNormQuant", outputs=("y1", "y2", "x"),
                       requires={"beta": None, "dst_type": None}),
    kernels={"cuda": TritonKernel(add_rms_norm_quant_cuda)},
    reference=add_rms_norm_quant_reference, fake=add_rms_norm_quant_fake, native=("cpu",),
    # float8 / HiFloat8 outputs: csrc/add_rms_norm_quant.cpp routes them here
    reference_op=True,
    doc="add + rms_norm (+ beta) + static quantisation (int8, float8, hifloat8), one or two "
        "scale sets.",
    benchmarks=(Benchmark(_bench_inputs, _unfused, "npu_add_rms_norm + npu_quantize"),),
    composite=Composite(_unfused_spelling, outputs=("y1", "y2", "x_out"),
                        optional_outputs=("x_out",), defaults=("epsilon",), fixed={"axis": -1}),
)
