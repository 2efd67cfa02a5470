"""npu_add_rms_norm: x = x1 + x2, then rms_norm of the unrounded sum.

Native CPU kernel: csrc/add_rms_norm.cpp (over kernels/rms_norm.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import bench_norm_inputs
from op_sdk.ops._norm import _normalize, _rms_norm_grad, check_add_rms_norm, rstd_shape


def add_rms_norm_reference(x1, x2, gamma, epsilon=1e-6):
    check_add_rms_norm("npu_add_rms_norm", x1, x2, gamma)
    x = x1.float() + x2.float()
    y, rstd = _normalize(x, gamma, epsilon)
    return y.to(x1.dtype), rstd, x.to(x1.dtype)


def add_rms_norm_fake(x1, x2, gamma, epsilon=1e-6):
    check_add_rms_norm("npu_add_rms_norm", x1, x2, gamma)
    rstd = x1.new_empty(rstd_shape(x1, gamma), dtype=torch.float32)
    return torch.empty_like(x1), rstd, torch.empty_like(x1)


def _add_rms_norm_setup(ctx, inputs, output):
    x1, x2, gamma = inputs[0], inputs[1], inputs[2]
    ctx.save_for_backward(x1, x2, gamma, output[1])


def _add_rms_norm_backward(ctx, dy, drstd, dx_out):
    x1, x2, gamma, rstd = ctx.saved_tensors
    dx, dgamma = _rms_norm_grad(x1.float() + x2.float(), gamma, rstd, dy, drstd)
    if dx_out is not None:
        dx = dx + dx_out.float()
    return dx.to(x1.dtype), dx.to(x2.dtype), dgamma.to(gamma.dtype), None



def _unfused(x1, x2, gamma, epsilon=1e-6):
    """What a graph computes without the operator: an add, then npu_rms_norm."""
    return torch.ops.npu.npu_rms_norm(x1 + x2, gamma, epsilon)



def add_rms_norm_cuda(x1, x2, gamma, epsilon=1e-6):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/norm.py); empty rows and rows longer
    than its MAX_ROW run the reference."""
    from op_sdk.triton_kernels import norm

    outs = add_rms_norm_fake(x1, x2, gamma, epsilon)
    if not norm.fits(gamma.numel()):
        return add_rms_norm_reference(x1, x2, gamma, epsilon)
    return norm.run(outs, x1, gamma.numel(), x2=x2, gamma=gamma, y=0, rstd=1, xo=2,
                    eps=epsilon)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnAddRmsNorm",
                   "const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, double epsilon, "
                   "const aclTensor* yOut, const aclTensor* rstdOut, const aclTensor* xOut",
                   prototypes.CANN_HEADERS + "aclnn_add_rms_norm.h")


npu_add_rms_norm = define_op(
    "npu_add_rms_norm(Tensor x1, Tensor x2, Tensor gamma, float epsilon=1e-06) "
    "-> (Tensor, Tensor, Tensor)",
    aclnn=AclnnBinding("aclnnAddRmsNorm", outputs=("y", "rstd", "x")),
    kernels={"cuda": TritonKernel(add_rms_norm_cuda)},
    reference=add_rms_norm_reference, fake=add_rms_norm_fake, native=("cpu",),
    backward=_add_rms_norm_backward, setup_context=_add_rms_norm_setup,
    doc="x = x1 + x2 (fp32); (y, rstd, x) with y, rstd from the unrounded sum.",
    benchmarks=(Benchmark(lambda t, h, dt: (bench_norm_inputs(t, h, dt), {}), _unfused, "add + npu_rms_norm"),),
)
