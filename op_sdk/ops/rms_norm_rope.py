"""op_sdk::rms_norm_rope: a head's RMSNorm, then its rotary embedding (Qwen3's q_norm / k_norm
followed by RoPE), in one pass over the data.

op_sdk's own operator, declared as a user's plugin is (namespace ``op_sdk``, scaffolded by
``op-sdk new-op``): torch_npu 2.13.0 has no operator whose contract matches. Its
npu_qkv_rms_norm_rope_cache also writes the key / value into paged caches (cache_mode "PA_NZ",
...) from one packed qkv tensor, and npu_kv_rmsnorm_rope_cache is DeepSeek's MLA (the norm and
the rope on different parts of the row); a Hugging Face Qwen3 block has separate q / k
projections and keeps its own cache. docs/fusions.md, fusion 8.

Contract (docs/operators.md): bit for bit ``npu_rotary_mul(npu_rms_norm(x, gamma, epsilon)[0],
cos, sin)`` ("half" mode, rotate_half's RoPE): the norm in float32 over the last dim, rounded
to x's dtype as npu_rms_norm returns it, then ``y = x1 * cos - x2 * sin | x2 * cos + x1 * sin``
of the halves in float32, rounded once, contiguous. The rules are those two operators' (each
applied here under this operator's name): x float16 / bfloat16 / float32 of 3 or 4 dims with an
even last dim D up to 1024; gamma of D elements in a dtype npu_rms_norm pairs with x's; cos /
sin of one shape, x's rank, each dim x's or 1, the last D, a float dtype (rounded to x's
first).

NPU: op_sdk's Ascend C kernel (kernels/ascendc/rms_norm_rope; hardware: not verified), its
aclnn binding and GE converter. Native CPU kernel: csrc/rms_norm_rope.cpp (npu_rms_norm's row
kernel, then npu_rotary_mul's, per row in cache); CUDA: op_sdk/triton_kernels/rotary.py's
``rms_norm_rope``. Calls outside the kernels' forms run the reference.
"""

from __future__ import annotations

import torch

from op_sdk.composite import Composite, Spelling, same
from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.ops import check
from op_sdk.ops._common import bench_randn
from op_sdk.ops._norm import _normalize, _rms_norm_grad
from op_sdk.ops.rms_norm import check_rms_norm
from op_sdk.ops.rotary_mul import check_rotary_mul, rotated
from op_sdk.triton_kernels import TritonKernel

OP = "rms_norm_rope"


def check_rms_norm_rope(x, gamma, cos, sin):
    """The contract's rules, shared by the reference, the fake and the CUDA launcher (the
    CPU launcher sends every call outside its form to the reference)."""
    check_rotary_mul(OP, x, cos, sin, "half", names=("x", "cos", "sin"))
    check(gamma.dim() == 1, OP, "gamma",
          f"must be 1-D (the last dim of 'x', {x.shape[-1]}), got {gamma.dim()} dims")
    check_rms_norm(x, gamma, op=OP, xname="x")


def _normalized(x, gamma, epsilon):
    """npu_rms_norm's y: the float32 norm rounded to x's dtype; and its rstd."""
    y, rstd = _normalize(x.float(), gamma, epsilon)
    return y.to(x.dtype), rstd


def rms_norm_rope_reference(x, gamma, cos, sin, epsilon=1e-06):
    """npu_rms_norm's y (rounded to x's dtype), then npu_rotary_mul's "half" arithmetic:
    float32 inside, one rounding, contiguous."""
    check_rms_norm_rope(x, gamma, cos, sin)
    return x.new_empty(x.shape).copy_(rotated(_normalized(x, gamma, epsilon)[0], cos, sin, "half"))


def rms_norm_rope_fake(x, gamma, cos, sin, epsilon=1e-06):
    check_rms_norm_rope(x, gamma, cos, sin)
    return x.new_empty(x.shape)


# the heads moved before the tokens, (B, S, N, D) -> (B, N, S, D): Hugging Face's
# `.transpose(1, 2)` between Qwen3's q_norm and its RoPE (a permute in the post-grad graph)
HEADS_FIRST = (0, 2, 1, 3)


def _heads_first(t):
    return t.permute(*HEADS_FIRST)


def _unfused(x, gamma, cos, sin, epsilon=1e-06, *, heads=same):
    """The chain the operator replaces (fusion 8's pattern): npu_rms_norm's y, the ``heads``
    step (Qwen3's transpose, moved onto x in the replacement: the norm works row by row),
    then npu_rotary_mul."""
    y = torch.ops.npu.npu_rms_norm(x, gamma, epsilon)[0]
    return torch.ops.npu.npu_rotary_mul(heads(y), cos, sin)


def _setup(ctx, inputs, output):
    x, gamma, cos, sin = inputs[:4]
    ctx.epsilon = inputs[4] if len(inputs) > 4 else 1e-6
    ctx.save_for_backward(x, gamma, cos, sin)


def _backward(ctx, grad):
    """The chain's gradient: npu_rotary_mul's backward on the recomputed norm, then
    npu_rms_norm's (float32 inside, as theirs)."""
    x, gamma, cos, sin = ctx.saved_tensors
    t, rstd = _normalized(x, gamma, ctx.epsilon)
    dt, dcos, dsin = torch.ops.npu.npu_rotary_mul_backward(grad, t, cos, sin, "half")
    dx, dgamma = _rms_norm_grad(x, gamma, rstd, dt, None)
    return dx.to(x.dtype), dgamma.to(gamma.dtype), dcos.to(cos.dtype), dsin.to(sin.dtype), None


def rms_norm_rope_cuda(x, gamma, cos, sin, epsilon=1e-06):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/rotary.py: one program holds whole rows,
    the norm and the rotation in registers)."""
    from op_sdk.triton_kernels import rotary

    out = rms_norm_rope_fake(x, gamma, cos, sin, epsilon)
    return rotary.run_rms_norm_rope(x, gamma, cos.to(x.dtype), sin.to(x.dtype), epsilon, out)


def _bench_inputs(t, h, dt):
    """Qwen3's q: t tokens of h // 128 heads of 128 (B, S, N, D with B = 1), cos / sin per
    token (1, S, 1, D), gamma of 128."""
    heads = max(1, h // 128)
    return (bench_randn(1, t, heads, 128, dtype=dt), bench_randn(128, dtype=dt),
            bench_randn(1, t, 1, 128, dtype=dt), bench_randn(1, t, 1, 128, dtype=dt)), {}


def _transformers(x, gamma, cos, sin, epsilon=1e-06):
    """Qwen3's q_norm (Qwen3RMSNorm) then apply_rotary_pos_emb's rotate_half RoPE, as
    transformers writes them (in x's layout): the kernel benchmark's eager baseline and what
    it compiles with torch.compile."""
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + epsilon)
    t = gamma * h.to(x.dtype)
    half = t.shape[-1] // 2
    return t * cos + torch.cat((-t[..., half:], t[..., :half]), -1) * sin


# the aclnn API the binding calls: the GetWorkspaceSize prototype CANN generates from the
# kernel's OpDef when the kernel package is built (inputs, attributes, outputs)
prototypes.declare("aclnnRmsNormRope",
                   ("const aclTensor* x, "
                    "const aclTensor* gamma, "
                    "const aclTensor* cos, "
                    "const aclTensor* sin, "
                    "double epsilon, "
                    "const aclTensor* yOut"),
                   "the OpDef kernels/ascendc/rms_norm_rope/op_host/rms_norm_rope_def.cpp "
                   "(CANN's generated-aclnn rule)", cann="generated by CANN from the kernel's OpDef")

rms_norm_rope = define_op(
    "rms_norm_rope(Tensor x, Tensor gamma, Tensor cos, Tensor sin, float epsilon=1e-06) -> Tensor",
    namespace="op_sdk",
    reference=rms_norm_rope_reference, fake=rms_norm_rope_fake, native=("cpu",),
    kernels={"cuda": TritonKernel(rms_norm_rope_cuda)},
    # on the NPU: the aclnn API of op_sdk's Ascend C kernel (kernels/ascendc/rms_norm_rope),
    # bound OpPlugin-style (csrc/npu/rms_norm_rope.cpp); its OpDef takes cos / sin of x's dtype
    aclnn=AclnnBinding("aclnnRmsNormRope", outputs=("y",)),
    # the CPU launcher routes calls outside its form (and invalid ones) to the reference
    reference_op=True,
    backward=_backward, setup_context=_setup,
    composite=Composite(_unfused, outputs=("y",), defaults=("epsilon",), spellings={
        "heads": {"": same, "permute": Spelling(_heads_first, inputs={"x": _heads_first})}}),
    # against transformers' code (eager and compiled), and against op_sdk's own two kernels
    # one after the other (the chain the fusion replaces)
    benchmarks=(Benchmark(_bench_inputs, _transformers, "Qwen3 q_norm + RoPE (transformers)",
                          composite=_transformers),
                Benchmark(_bench_inputs, _unfused, "npu_rms_norm + npu_rotary_mul (native)",
                          composite=_transformers)),
    doc="RMSNorm over the last dim (rounded to x's dtype), then rotate_half's RoPE with cos / "
        "sin: npu_rotary_mul(npu_rms_norm(x, gamma, epsilon)[0], cos, sin) in one pass.",
)
