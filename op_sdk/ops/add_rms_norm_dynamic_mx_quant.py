"""npu_add_rms_norm_dynamic_mx_quant: x = x1 + x2 (fp32, returned rounded to x1's dtype),
rms_norm of the fp32 sum over the last dim (times gamma, plus beta) rounded to x1's dtype,
then MX quantised along the last dim in blocks of 32 (op_sdk/ops/_mx.py): float8 / packed
float4 values, the sum, E8M0 scales, and rstd.

Native CPU kernel: csrc/add_rms_norm_dynamic_mx_quant.cpp (kernels/mx_quant.h), for every
valid call; it routes the calls breaking a rule here. CUDA: the Triton kernel of
op_sdk/triton_kernels/mx.py.
"""

from __future__ import annotations

import torch

from op_sdk.composite import Composite
from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import bench_norm_inputs, check, check_same_shape
from op_sdk.ops._mx import kernel_form, mx_outputs_like
from op_sdk.ops.dynamic_mx_quant import MX_BINDING, MX_OPS_NN
from op_sdk.ops.rms_norm_dynamic_mx_quant import check_norm_mx, norm_mx_quant

OP = "npu_add_rms_norm_dynamic_mx_quant"


def check_add_norm_mx(x1, x2, gamma, beta, round_mode, dst_type, scale_alg):
    code_alg = check_norm_mx(OP, x1, "x1", gamma, beta, round_mode, dst_type, scale_alg)
    check_same_shape(x2, x1, OP, "x2", "x1")
    check(x2.dtype == x1.dtype, OP, "x2",
          f"must have the dtype of 'x1' ({x1.dtype}), got {x2.dtype}")
    return code_alg


def add_rms_norm_dynamic_mx_quant_reference(x1, x2, gamma, *, beta=None, epsilon=1e-6,
                                            scale_alg=0, round_mode="rint", dst_type=296):
    code, alg = check_add_norm_mx(x1, x2, gamma, beta, round_mode, dst_type, scale_alg)
    x = x1.float() + x2.float()
    q, scale, rstd = norm_mx_quant(x, x1.dtype, gamma, beta, epsilon, code, alg, round_mode)
    y = mx_outputs_like(x1, code)[0].copy_(q)  # a float8 y in x1's layout, as the fake's
    return y, torch.empty_like(x1).copy_(x), scale, rstd


def add_rms_norm_dynamic_mx_quant_fake(x1, x2, gamma, *, beta=None, epsilon=1e-6,
                                       scale_alg=0, round_mode="rint", dst_type=296):
    code, _ = check_add_norm_mx(x1, x2, gamma, beta, round_mode, dst_type, scale_alg)
    y, scale = mx_outputs_like(x1, code)
    return (y, torch.empty_like(x1), scale,
            x1.new_empty((*x1.shape[:-1], 1), dtype=torch.float32))


def add_rms_norm_dynamic_mx_quant_cuda(x1, x2, gamma, *, beta=None, epsilon=1e-6,
                                       scale_alg=0, round_mode="rint", dst_type=296):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/mx.py) for every valid call; empty rows
    and rows longer than its MAX_ROW run the reference."""
    from op_sdk.triton_kernels import mx

    kw = {"beta": beta, "epsilon": epsilon, "scale_alg": scale_alg, "round_mode": round_mode,
          "dst_type": dst_type}
    code, alg = check_add_norm_mx(x1, x2, gamma, beta, round_mode, dst_type, scale_alg)
    if not mx.fits(x1.shape[-1]):
        return add_rms_norm_dynamic_mx_quant_reference(x1, x2, gamma, **kw)
    outs = add_rms_norm_dynamic_mx_quant_fake(x1, x2, gamma, **kw)  # allocated as the fake does
    return mx.run(outs, x1, x1.shape[-1], kernel_form(code, alg, round_mode), x2=x2, gamma=gamma,
                  beta=beta, y=0, xo=1, scale=2, rstd=3, eps=epsilon)


def _unfused_spelling(x1, x2, gamma, epsilon=1e-6, scale_alg=0, dst_type=296):
    """What the fused operator computes: npu_add_rms_norm (the norm of the fp32 sum, its y
    rounded to x1's dtype), then npu_dynamic_mx_quant of y along the last dim in blocks of
    32 (round_mode "rint": the fusion's form; the operator takes the others)."""
    y, rstd, x_out = torch.ops.npu.npu_add_rms_norm.default(x1, x2, gamma, epsilon)
    q, scale = torch.ops.npu.npu_dynamic_mx_quant.default(
        y, dst_type=dst_type, scale_alg=scale_alg)
    return {"y": q, "mxscale": scale, "x_out": x_out, "rstd": rstd}


def _unfused(x1, x2, gamma, *, dst_type=296, **kw):
    y, _, x = torch.ops.npu.npu_add_rms_norm(x1, x2, gamma)
    q, s = torch.ops.npu.npu_dynamic_mx_quant(y, dst_type=dst_type)
    return q, x, s


prototypes.declare("aclnnAddRmsNormDynamicMxQuant",
                   "const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, "
                   "const aclTensor* beta, double epsilon, int64_t scaleAlg, char* roundMode, "
                   "int64_t dstType, bool outputRstd, aclTensor* yOut, aclTensor* xOut, "
                   "aclTensor* mxscaleOut, aclTensor* rstdOut",
                   MX_OPS_NN + "norm/add_rms_norm_dynamic_mx_quant/op_host/op_api/"
                   "aclnn_add_rms_norm_dynamic_mx_quant.h", nullable=("beta",),
                   cann="ops-nn e5c3fa9")


npu_add_rms_norm_dynamic_mx_quant = define_op(
    "npu_add_rms_norm_dynamic_mx_quant(Tensor x1, Tensor x2, Tensor gamma, *, "
    "Tensor? beta=None, float epsilon=1e-06, int scale_alg=0, str round_mode=\"rint\", "
    "int dst_type=296) -> (Tensor, Tensor, Tensor, Tensor)",
    reference=add_rms_norm_dynamic_mx_quant_reference,
    fake=add_rms_norm_dynamic_mx_quant_fake, native=("cpu",),
    kernels={"cuda": TritonKernel(add_rms_norm_dynamic_mx_quant_cuda)},
    # rstd always (outputRstd true): the operator returns it whatever requires grad
    aclnn=AclnnBinding("aclnnAddRmsNormDynamicMxQuant", constants={"outputRstd": "true"},
                       **{**MX_BINDING, "outputs": ("y", "x", "mxscale", "rstd")}),
    # calls outside the kernel's forms (every call breaking a rule): the launcher routes
    # them here
    reference_op=True,
    doc="add + rms_norm (* gamma + beta) rounded to x1's dtype, then MX quantisation of the "
        "last dim (float8 / float4, E8M0 scales per 32); the sum and rstd.",
    benchmarks=(Benchmark(lambda t, h, dt: (bench_norm_inputs(t, h, dt), {"dst_type": 292}),
                          _unfused, "npu_add_rms_norm + npu_dynamic_mx_quant"),),
    composite=Composite(_unfused_spelling, outputs=("y", "x_out", "mxscale", "rstd"),
                        optional_outputs=("x_out", "rstd"),
                        defaults=("epsilon", "dst_type"),
                        markers={"dst_type": 292}),
)
