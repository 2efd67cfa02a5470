"""npu_interleave_rope: rotary position embedding of one input whose last dim holds
interleaved pairs (DeepSeek's MLA rope part; torch_npu.npu_interleave_rope; CANN's
InterleaveRope, aclnnInterleaveRope, ops-transformer posembedding/interleave_rope).

Contract (docs/operators.md, "The LLM operator families"), from the aclnnInterleaveRope
document: ``x`` float16, bfloat16 or float32 of 4 dims (B, N, S, D) with D = 64;
``cos`` / ``sin`` of x's dtype and one shape (B or 1, 1, S or 1, 64). With ``q`` = x
de-interleaved (``reshape(B, N, S, 32, 2).transpose(-1, -2).reshape(B, N, S, 64)``),
``y = q * cos + RotateHalf(q) * sin`` where ``RotateHalf(q) = cat(-q2, q1)`` of q's
halves: float32 inside, each product rounded, one rounding to x's dtype; y in x's layout
(torch_npu's Meta: ``empty_like(x)``). That is npu_rotary_mul's "interleave-half" mode on
these shapes, so the slice computes it with npu_rotary_mul's arithmetic (``rotary_mul.rotated``,
its mode table ``rotation``) and kernels: CPU csrc/rotary_mul.cpp, CUDA
triton_kernels/rotary.py.
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.ops import check
from op_sdk.ops._common import bench_randn
from op_sdk.ops.rotary_mul import DTYPES, MODES, rotated
from op_sdk.triton_kernels import TritonKernel

OP = "npu_interleave_rope"
D = 64  # the operator's only head dim (aclnnInterleaveRope: "must be 64")
MODE = "interleave-half"  # npu_rotary_mul's mode that computes it


def check_interleave_rope(x, cos, sin):
    """The contract's rules, shared by the reference, the fake and the CUDA kernel (the CPU
    kernel's fast form admits a subset)."""
    check(x.dtype in DTYPES, OP, "x", f"must have dtype float16, bfloat16 or float32, got {x.dtype}")
    check(x.dim() == 4 and x.shape[-1] == D, OP, "x",
          f"must have 4 dims (B, N, S, D) with D = {D}, got {list(x.shape)}")
    b, _, s, _ = x.shape
    check(cos.dtype == x.dtype, OP, "cos", f"must have x's dtype {x.dtype}, got {cos.dtype}")
    check(cos.dim() == 4 and cos.shape[0] in (1, b) and cos.shape[1] == 1
          and cos.shape[2] in (1, s) and cos.shape[3] == D, OP, "cos",
          f"must have shape (B or 1, 1, S or 1, {D}) for x of {list(x.shape)}, got "
          f"{list(cos.shape)}")
    check(sin.dtype == x.dtype and sin.shape == cos.shape, OP, "sin",
          f"must have cos's shape {list(cos.shape)} and dtype {cos.dtype}, got "
          f"{list(sin.shape)} {sin.dtype}")


def interleave_rope_reference(x, cos, sin):
    """The ground truth: q * cos + RotateHalf(q) * sin in float32 (q = x de-interleaved),
    rounded once to x's dtype, in x's layout."""
    check_interleave_rope(x, cos, sin)
    return torch.empty_like(x).copy_(rotated(x, cos, sin, MODE))


def interleave_rope_fake(x, cos, sin):
    check_interleave_rope(x, cos, sin)
    return torch.empty_like(x)


def interleave_rope_cuda(x, cos, sin):
    """The CUDA kernel: npu_rotary_mul's Triton kernel (op_sdk/triton_kernels/rotary.py) in
    its "interleave-half" mode, written in x's layout."""
    from op_sdk.triton_kernels import rotary

    out = interleave_rope_fake(x, cos, sin)
    return rotary.run(x, cos, sin, MODES[MODE], out)


def _bench_inputs(t, h, dt):
    """Decode: t sequences of one token, h // 64 heads of the rope part (BNSD, S = 1), cos /
    sin per sequence (B11D)."""
    heads = max(1, h // D)
    return (bench_randn(t, heads, 1, D, dtype=dt), bench_randn(t, 1, 1, D, dtype=dt),
            bench_randn(t, 1, 1, D, dtype=dt)), {}


# the aclnn API torch_npu's own kernel calls (op-plugin InterleaveRopeNpuOpApi.cpp:
# aclnnInterleaveRope), its prototype as ops-transformer documents it
prototypes.declare("aclnnInterleaveRope",
                   "const aclTensor* x, const aclTensor* cos, const aclTensor* sin, "
                   "aclTensor* out",
                   prototypes.CANN_HEADERS + "aclnn_interleave_rope.h")

npu_interleave_rope = define_op(
    "npu_interleave_rope(Tensor x, Tensor cos, Tensor sin) -> Tensor",
    reference=interleave_rope_reference, fake=interleave_rope_fake, native=("cpu",),
    # the CPU launcher routes the forms outside its fast path (and invalid calls) here
    reference_op=True,
    kernels={"cuda": TritonKernel(interleave_rope_cuda)},
    aclnn=AclnnBinding("aclnnInterleaveRope", outputs=("out",)),
    benchmarks=(Benchmark(_bench_inputs),),
    doc="Rotary position embedding of x's de-interleaved last dim (64): q * cos + "
        "RotateHalf(q) * sin (float32 inside).",
)
