"""npu_gemma_rms_norm: Gemma's rms-norm, y = x * rstd * (1 + gamma) over gamma's dims.

ops-nn `norm/gemma_rms_norm` (aclnnGemmaRmsNorm): its kernel is ops-nn's rms-norm kernel with
the gemma switch, which up-casts gamma, adds 1 in fp32 and multiplies; one rounding to x's
dtype. Native CPU kernel: csrc/gemma_rms_norm.cpp (npu_rms_norm's row kernel given 1 + gamma).
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.triton_kernels import TritonKernel
from op_sdk.ops._common import FLOAT_DTYPES, bench_randn, check, check_dtype
from op_sdk.ops._norm import _normalize, _rms_norm_grad, check_gamma, gamma_weight, rstd_shape

OP = "npu_gemma_rms_norm"


def check_gemma_rms_norm(input, gamma):
    """aclnnGemmaRmsNorm's rules: x float16 / bfloat16 / float32 with 1 to 8 dims, gamma of
    its dtype covering its trailing dims."""
    check_dtype(input, OP, "input", FLOAT_DTYPES)
    check(1 <= input.dim() <= 8, OP, "input", f"must have 1 to 8 dims, got {input.dim()}")
    check(gamma.dtype == input.dtype, OP, "gamma",
          f"must have the dtype of 'input' ({input.dtype}), got {gamma.dtype}")
    check_gamma(OP, input, gamma, "input")


def gemma_rms_norm_reference(input, gamma, epsilon=1e-6):
    check_gemma_rms_norm(input, gamma)
    y, rstd = _normalize(input.float(), gamma, epsilon, plus_one=True)
    return y.to(input.dtype), rstd


def gemma_rms_norm_fake(input, gamma, epsilon=1e-6):
    check_gemma_rms_norm(input, gamma)
    # rstd float32 (op-plugin allocates it so; torch_npu's docstring's "input's dtype" is not
    # what its kernel or Meta function do)
    return torch.empty_like(input), input.new_empty(rstd_shape(input, gamma), dtype=torch.float32)


def _setup(ctx, inputs, output):
    input, gamma = inputs[0], inputs[1]
    ctx.save_for_backward(input, gamma, output[1])


def _backward(ctx, dy, drstd):
    """torch_npu registers no derivative for it; op_sdk's is npu_rms_norm's with the weight
    1 + gamma (d(1 + gamma) = dgamma)."""
    input, gamma, rstd = ctx.saved_tensors
    dx, dgamma = _rms_norm_grad(input, gamma_weight(gamma, True), rstd, dy, drstd)
    return dx.to(input.dtype), dgamma.to(gamma.dtype), None


def _unfused(input, gamma, epsilon=1e-6):
    """What a model computes without the operator (Hugging Face's Gemma RMSNorm): the
    mean of squares, rsqrt, then times (1 + gamma), in fp32."""
    x = input.float()
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + epsilon)
    return (y * (1.0 + gamma.float())).to(input.dtype)


def gemma_rms_norm_cuda(input, gamma, epsilon=1e-6):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/norm.py: npu_rms_norm's, given
    1 + gamma in fp32); empty rows and rows longer than its MAX_ROW run the reference."""
    from op_sdk.triton_kernels import norm

    outs = gemma_rms_norm_fake(input, gamma, epsilon)
    if not norm.fits(gamma.numel()):
        return gemma_rms_norm_reference(input, gamma, epsilon)
    return norm.run(outs, input, gamma.numel(), gamma=gamma_weight(gamma, True), y=0, rstd=1,
                    eps=epsilon)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
prototypes.declare("aclnnGemmaRmsNorm",
                   "const aclTensor* x, const aclTensor* gamma, double epsilon, "
                   "const aclTensor* yOut, const aclTensor* rstdOut",
                   prototypes.OPS_NN + "norm/gemma_rms_norm/op_host/op_api/aclnn_gemma_rms_norm.h",
                   cann="8.5.0")


npu_gemma_rms_norm = define_op(
    "npu_gemma_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)",
    aclnn=AclnnBinding("aclnnGemmaRmsNorm", outputs=("y", "rstd"), rename={"x": "input"}),
    kernels={"cuda": TritonKernel(gemma_rms_norm_cuda)},
    reference=gemma_rms_norm_reference, fake=gemma_rms_norm_fake, native=("cpu",),
    backward=_backward, setup_context=_setup,
    doc="Gemma's rms-norm: y = x * rstd * (1 + gamma) over gamma's dims; rstd = "
        "1/sqrt(mean(x^2) + eps), float32.",
    benchmarks=(Benchmark(lambda t, h, dt: ((bench_randn(t, h, dtype=dt), bench_randn(h, dtype=dt)), {}),
                          _unfused, "Gemma RMSNorm in torch"),),
)
