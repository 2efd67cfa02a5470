"""npu_rms_norm: y = x * rstd * gamma over gamma's dims.

Native CPU kernel: csrc/rms_norm.cpp (over kernels/rms_norm.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import bench_randn, check
from op_sdk.ops._norm import _normalize, _rms_norm_grad, check_gamma, rstd_shape


_RMS_NORM_DTYPES = {
    (torch.float16, torch.float32), (torch.bfloat16, torch.float32),
    (torch.float16, torch.float16), (torch.bfloat16, torch.bfloat16),
    (torch.float32, torch.float32),
}


def check_rms_norm(input, gamma, op="npu_rms_norm", xname="input"):
    """npu_rms_norm's rules (op / xname: the operator and its x argument named in an error:
    op_sdk::rms_norm_rope applies them too)."""
    check(input.dim() >= 1, op, xname, "must have at least 1 dim")
    check((input.dtype, gamma.dtype) in _RMS_NORM_DTYPES, op, "gamma",
          f"dtype must pair with '{xname}' as (float16, float32), (bfloat16, float32), "
          "(float16, float16), (bfloat16, bfloat16) or (float32, float32); got "
          f"({input.dtype}, {gamma.dtype})")
    check_gamma(op, input, gamma, xname)




def rms_norm_reference(input, gamma, epsilon=1e-6):
    check_rms_norm(input, gamma)
    y, rstd = _normalize(input.float(), gamma, epsilon)
    return y.to(input.dtype), rstd


def rms_norm_fake(input, gamma, epsilon=1e-6):
    check_rms_norm(input, gamma)
    return torch.empty_like(input), input.new_empty(rstd_shape(input, gamma), dtype=torch.float32)


def _rms_norm_setup(ctx, inputs, output):
    input, gamma = inputs[0], inputs[1]
    ctx.save_for_backward(input, gamma, output[1])


def _rms_norm_backward(ctx, dy, drstd):
    input, gamma, rstd = ctx.saved_tensors
    dx, dgamma = _rms_norm_grad(input, gamma, rstd, dy, drstd)
    return dx.to(input.dtype), dgamma.to(gamma.dtype), None






def rms_norm_cuda(input, gamma, epsilon=1e-6):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/norm.py); empty rows and rows longer
    than its MAX_ROW run the reference."""
    from op_sdk.triton_kernels import norm

    outs = rms_norm_fake(input, gamma, epsilon)
    if not norm.fits(gamma.numel()):
        return rms_norm_reference(input, gamma, epsilon)
    return norm.run(outs, input, gamma.numel(), gamma=gamma, y=0, rstd=1, eps=epsilon)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnRmsNorm",
                   "const aclTensor* x, const aclTensor* gamma, double epsilon, "
                   "const aclTensor* yOut, const aclTensor* rstdOut",
                   prototypes.CANN_HEADERS + "aclnn_rms_norm.h")


npu_rms_norm = define_op(
    "npu_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    aclnn=AclnnBinding("aclnnRmsNorm", outputs=("y", "rstd"), rename={"x": "input"}),
    kernels={"cuda": TritonKernel(rms_norm_cuda)},
    reference=rms_norm_reference, fake=rms_norm_fake, native=("cpu",),
    backward=_rms_norm_backward, setup_context=_rms_norm_setup,
    doc="y = x * rstd * gamma over gamma's dims; rstd = 1/sqrt(mean(x^2) + eps).",
    benchmarks=(Benchmark(lambda t, h, dt: ((bench_randn(t, h, dtype=dt), bench_randn(h, dtype=dt)), {})),),
)
