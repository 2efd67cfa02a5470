"""npu_rms_norm_dynamic_mx_quant: rms_norm over the last dim (times gamma, plus beta), the
result rounded to x's dtype, then MX quantised along the last dim in blocks of 32
(op_sdk/ops/_mx.py): float8 / packed float4 values, E8M0 scales, and rstd.

Native CPU kernel: csrc/rms_norm_dynamic_mx_quant.cpp (kernels/mx_quant.h), for every valid
call; it routes the calls breaking a rule here. CUDA: the Triton kernel of
op_sdk/triton_kernels/mx.py.
"""

from __future__ import annotations

import torch

from op_sdk.composite import Composite
from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import HALF_DTYPES, bench_norm_inputs, check, check_1d, check_dtype
from op_sdk.ops._mx import check_mx_args, kernel_form, mx_outputs_like, mx_quantize
from op_sdk.ops.dynamic_mx_quant import MX_BINDING, MX_OPS_NN
from op_sdk.ops._norm import _normalize

OP = "npu_rms_norm_dynamic_mx_quant"


def check_norm_mx(op, x, xname, gamma, beta, round_mode, dst_type, scale_alg):
    """The fused MX norms' rules: x float16 / bfloat16 of 1 - 7 dims, gamma 1-D over its last
    dim in x's dtype or float32, beta gamma's shape and dtype; returns (dst code, scale_alg)."""
    check_dtype(x, op, xname, HALF_DTYPES)
    check(1 <= x.dim() <= 7, op, xname, f"must have 1 to 7 dims, got {x.dim()}")
    check_1d(gamma, op, "gamma", x.shape[-1])
    check(gamma.dtype in (x.dtype, torch.float32), op, "gamma",
          f"must have the dtype of '{xname}' ({x.dtype}) or float32, got {gamma.dtype}")
    if beta is not None:
        check_1d(beta, op, "beta", x.shape[-1])
        check(beta.dtype == gamma.dtype, op, "beta",
              f"must have the dtype of 'gamma' ({gamma.dtype}), got {beta.dtype}")
    return check_mx_args(op, x, xname, dst_type, round_mode, scale_alg, fused=True)


def norm_mx_quant(x32, dtype, gamma, beta, epsilon, code, alg, round_mode):
    """The fused norms' common part: the fp32 norm of ``x32`` (times gamma, plus beta),
    rounded to ``dtype``, MX quantised along the last dim. Returns (y, mxscale, rstd)."""
    x32 = x32.contiguous()  # the reductions sum in one order whatever the input's strides
    y, rstd = _normalize(x32, gamma, epsilon)
    if beta is not None:
        y = y + beta.float()
    q, scale = mx_quantize(y.to(dtype), code, alg=alg, round_mode=round_mode)
    return q, scale, rstd


def rms_norm_dynamic_mx_quant_reference(x, gamma, *, beta=None, epsilon=1e-6, scale_alg=0,
                                        round_mode="rint", dst_type=296):
    code, alg = check_norm_mx(OP, x, "x", gamma, beta, round_mode, dst_type, scale_alg)
    q, scale, rstd = norm_mx_quant(x.float(), x.dtype, gamma, beta, epsilon, code, alg,
                                   round_mode)
    y = mx_outputs_like(x, code)[0].copy_(q)  # a float8 y in x's layout, as the fake's
    return y, scale, rstd


def rms_norm_dynamic_mx_quant_fake(x, gamma, *, beta=None, epsilon=1e-6, scale_alg=0,
                                   round_mode="rint", dst_type=296):
    code, _ = check_norm_mx(OP, x, "x", gamma, beta, round_mode, dst_type, scale_alg)
    y, scale = mx_outputs_like(x, code)
    return y, scale, x.new_empty((*x.shape[:-1], 1), dtype=torch.float32)


def rms_norm_dynamic_mx_quant_cuda(x, gamma, *, beta=None, epsilon=1e-6, scale_alg=0,
                                   round_mode="rint", dst_type=296):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/mx.py) for every valid call; empty rows
    and rows longer than its MAX_ROW run the reference."""
    from op_sdk.triton_kernels import mx

    kw = {"beta": beta, "epsilon": epsilon, "scale_alg": scale_alg, "round_mode": round_mode,
          "dst_type": dst_type}
    code, alg = check_norm_mx(OP, x, "x", gamma, beta, round_mode, dst_type, scale_alg)
    if not mx.fits(x.shape[-1]):
        return rms_norm_dynamic_mx_quant_reference(x, gamma, **kw)
    outs = rms_norm_dynamic_mx_quant_fake(x, gamma, **kw)  # allocated as the fake does
    return mx.run(outs, x, x.shape[-1], kernel_form(code, alg, round_mode), gamma=gamma,
                  beta=beta, rstd=2, eps=epsilon)


def _unfused_spelling(x, gamma, epsilon=1e-6, scale_alg=0, dst_type=296):
    """What the fused operator computes: npu_rms_norm (its y rounded to x's dtype), then
    npu_dynamic_mx_quant of y along the last dim in blocks of 32 (round_mode "rint": the
    fusion's form; the operator takes the others)."""
    y, rstd = torch.ops.npu.npu_rms_norm.default(x, gamma, epsilon)
    q, scale = torch.ops.npu.npu_dynamic_mx_quant.default(
        y, dst_type=dst_type, scale_alg=scale_alg)
    return {"y": q, "mxscale": scale, "rstd": rstd}


def _unfused(x, gamma, *, dst_type=296, **kw):
    y, _ = torch.ops.npu.npu_rms_norm(x, gamma)
    return torch.ops.npu.npu_dynamic_mx_quant(y, dst_type=dst_type)


prototypes.declare("aclnnRmsNormDynamicMxQuant",
                   "const aclTensor* x, const aclTensor* gamma, const aclTensor* beta, "
                   "double epsilon, int64_t scaleAlg, char* roundMode, int64_t dstType, "
                   "bool outputRstd, aclTensor* yOut, aclTensor* mxscaleOut, aclTensor* rstdOut",
                   MX_OPS_NN + "norm/rms_norm_dynamic_mx_quant/op_host/op_api/"
                   "aclnn_rms_norm_dynamic_mx_quant.h", nullable=("beta",), cann="ops-nn e5c3fa9")


npu_rms_norm_dynamic_mx_quant = define_op(
    "npu_rms_norm_dynamic_mx_quant(Tensor x, Tensor gamma, *, Tensor? beta=None, "
    "float epsilon=1e-06, int scale_alg=0, str round_mode=\"rint\", int dst_type=296) "
    "-> (Tensor, Tensor, Tensor)",
    reference=rms_norm_dynamic_mx_quant_reference, fake=rms_norm_dynamic_mx_quant_fake,
    native=("cpu",), kernels={"cuda": TritonKernel(rms_norm_dynamic_mx_quant_cuda)},
    # rstd always (outputRstd true): the operator returns it whatever requires grad
    aclnn=AclnnBinding("aclnnRmsNormDynamicMxQuant", constants={"outputRstd": "true"},
                       **{**MX_BINDING, "outputs": ("y", "mxscale", "rstd")}),
    # calls outside the kernel's forms (every call breaking a rule): the launcher routes
    # them here
    reference_op=True,
    doc="rms_norm (* gamma + beta) rounded to x's dtype, then MX quantisation of the last dim "
        "(float8 / float4, E8M0 scales per 32), and rstd.",
    benchmarks=(Benchmark(lambda t, h, dt: (bench_norm_inputs(t, h, dt)[::2],
                                          {"dst_type": 292}),
                          _unfused, "npu_rms_norm + npu_dynamic_mx_quant"),),
    composite=Composite(_unfused_spelling, outputs=("y", "mxscale", "rstd"),
                        optional_outputs=("rstd",),
                        defaults=("epsilon", "dst_type"),
                        markers={"dst_type": 292}),
)
