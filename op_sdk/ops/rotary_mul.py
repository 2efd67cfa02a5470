"""npu_rotary_mul: rotary position embedding, ``y = A(x) * r1 + B(x) * r2`` along the last
dim (torch_npu.npu_rotary_mul; CANN's RotaryPositionEmbedding, aclnnRotaryPositionEmbeddingV2,
ops-transformer posembedding/rotary_position_embedding), and its backward
npu_rotary_mul_backward (aclnnRotaryPositionEmbeddingGrad), which autograd of npu_rotary_mul
calls as torch_npu's does.

Contract (docs/operators.md, "The LLM operator families"): ``input`` float16, bfloat16 or
float32 of 3 (TND) or 4 dims; ``r1`` / ``r2`` (cos / sin) of one shape, input's rank, each dim
input's or 1, the last input's; a float dtype, cast to input's first (op-plugin's rule);
``rotary_mode`` "half", "interleave", "quarter" or "interleave-half" (the last two: Ascend 950);
the last dim even, a multiple of 4 for "quarter", at most 1024; ``rotate`` an optional
(D, D) matrix of input's dtype with "half" / "interleave" (then ``B(x) = x @ rotate``). Each
mode is a permutation of the last dim with signs (``rotation``): float32 inside, one rounding.

Native CPU kernel: csrc/rotary_mul.cpp (over kernels/rotary.h), every mode without
``rotate``; calls with ``rotate`` run the reference.
"""

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import by_value
from op_sdk.ops import check
from op_sdk.ops._common import bench_randn
from op_sdk.triton_kernels import TritonKernel

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# rotary_mode -> aclnn's mode (op-plugin OpUtils get_rotary_mode)
MODES = {"half": 0, "interleave": 1, "quarter": 2, "interleave-half": 3}
MAX_D = 1024


@functools.lru_cache(maxsize=None)
def _rotation_lists(mode: str, d: int) -> tuple[list | None, list, list]:
    h, q = d // 2, d // 4
    if mode == "half":  # B(x) = cat(-x2, x1)
        return None, [*range(h, d), *range(h)], [-1.0] * h + [1.0] * h
    if mode == "interleave":  # B(x)[2k] = -x[2k + 1], B(x)[2k + 1] = x[2k]
        return None, [i ^ 1 for i in range(d)], [-1.0 if i % 2 == 0 else 1.0 for i in range(d)]
    if mode == "quarter":  # B(x) = cat(-x2, x1, -x4, x3) of the four quarters
        perm = [((i // q) ^ 1) * q + i % q for i in range(d)]
        return None, perm, [-1.0 if (i // q) % 2 == 0 else 1.0 for i in range(d)]
    # interleave-half: A(x) = cat(x[0::2], x[1::2]), B(x) = cat(-x[1::2], x[0::2])
    evens, odds = list(range(0, d, 2)), list(range(1, d, 2))
    return evens + odds, odds + evens, [-1.0] * h + [1.0] * h


def rotation(mode: str, d: int, device=None):
    """The mode as index tensors over the last dim: (A's permutation or None for the
    identity, B's permutation, B's signs in float32), ``A(x)[i] = x[pa[i]]`` and
    ``B(x)[i] = sb[i] * x[pb[i]]``. The reference and the ONNX composite read them from
    here; the Triton kernel's pair arithmetic is tested against them. Made once per
    device (a copy to a GPU is not made again on later calls, which may run under
    CUDA-graph capture); callers never write them. Under a
    dispatch mode (a trace: fake tensors, functionalization) they are made afresh, the
    traced graph's constants, and not kept."""
    if _get_current_dispatch_mode() is not None:
        return _rotation(mode, d, device)
    return _cached_rotation(mode, d, device)


@functools.lru_cache(maxsize=None)
def _cached_rotation(mode: str, d: int, device=None):
    return _rotation(mode, d, device)


def _rotation(mode: str, d: int, device=None):
    pa, pb, sb = _rotation_lists(mode, d)
    as_idx = lambda p: torch.tensor(p, dtype=torch.int64, device=device)  # noqa: E731
    return (None if pa is None else as_idx(pa)), as_idx(pb), torch.tensor(sb, device=device)


def _inverse(p: torch.Tensor) -> torch.Tensor:
    inv = torch.empty_like(p)
    inv[p] = torch.arange(p.numel(), device=p.device)
    return inv


def check_rotary_mul(op, input, r1, r2, rotary_mode, rotate=None,
                     names=("input", "r1", "r2")):
    """The contract's rules, shared by reference, fake and kernels; ``names``: what the
    operator calls input / r1 / r2 (op_sdk::rms_norm_rope's x / cos / sin)."""
    xn, n1, n2 = names
    check(input.dtype in DTYPES, op, xn,
          f"must have dtype float16, bfloat16 or float32, got {input.dtype}")
    check(input.dim() in (3, 4), op, xn,
          f"must have 3 (TND) or 4 (BNSD / BSND / SBND) dims, got {input.dim()}")
    check(rotary_mode in MODES, op, "rotary_mode",
          f"must be one of {', '.join(repr(m) for m in MODES)}, got {rotary_mode!r}")
    d = input.shape[-1]
    step = 4 if rotary_mode == "quarter" else 2
    check(d % step == 0 and 0 < d <= MAX_D, op, xn,
          f"must have a last dim that is a positive multiple of {step} up to {MAX_D} for "
          f"rotary_mode {rotary_mode!r}, got {d}")
    for name, r in ((n1, r1), (n2, r2)):
        check(r.dtype in DTYPES, op, name,
              f"must have dtype float16, bfloat16 or float32, got {r.dtype}")
        check(r.dim() == input.dim() and r.shape[-1] == d
              and all(a in (1, b) for a, b in zip(r.shape, input.shape)), op, name,
              f"must have {xn}'s rank {input.dim()}, last dim {d} and each other dim "
              f"{xn}'s or 1 ({xn} {list(input.shape)}), got {list(r.shape)}")
    check(r2.shape == r1.shape, op, n2,
          f"must have {n1}'s shape {list(r1.shape)}, got {list(r2.shape)}")
    if rotate is not None:
        check(rotary_mode in ("half", "interleave"), op, "rotate",
              f"must be None unless rotary_mode is 'half' or 'interleave', got "
              f"{rotary_mode!r}")
        check(rotate.dtype == input.dtype and tuple(rotate.shape) == (d, d), op, "rotate",
              f"must be a ({d}, {d}) matrix of input's dtype {input.dtype}, got "
              f"{list(rotate.shape)} {rotate.dtype}")


def _parts(x, r1, r2, rotary_mode, rotate):
    """(A(x), B(x), r1, r2) in float32; r1 / r2 rounded to x's dtype first."""
    xf = x.float()
    r1f, r2f = r1.to(x.dtype).float(), r2.to(x.dtype).float()
    if rotate is not None:
        return xf, xf @ rotate.float(), r1f, r2f
    pa, pb, sb = rotation(rotary_mode, x.shape[-1], x.device)
    a = xf if pa is None else xf.index_select(-1, pa)
    return a, xf.index_select(-1, pb) * sb, r1f, r2f


def rotated(x, r1, r2, rotary_mode, rotate=None):
    """A(x) * r1 + B(x) * r2 in float32 (each product rounded, then the sum): the
    arithmetic of every rotary operator's reference (npu_rotary_mul, npu_interleave_rope,
    npu_apply_rotary_pos_emb), which each rounds once into its own allocation."""
    a, b, r1f, r2f = _parts(x, r1, r2, rotary_mode, rotate)
    return a * r1f + b * r2f


def rotary_mul_reference(input, r1, r2, rotary_mode="half", rotate=None):
    """The ground truth (ops-transformer's golden): A(x) * r1 + B(x) * r2 in float32, rounded
    once to input's dtype, contiguous (torch_npu's Meta allocates it so)."""
    check_rotary_mul("npu_rotary_mul", input, r1, r2, rotary_mode, rotate)
    return input.new_empty(input.shape).copy_(rotated(input, r1, r2, rotary_mode, rotate))


def rotary_mul_fake(input, r1, r2, rotary_mode="half", rotate=None):
    check_rotary_mul("npu_rotary_mul", input, r1, r2, rotary_mode, rotate)
    return input.new_empty(input.shape)


def check_rotary_mul_backward(op, grad, input, r1, r2, rotary_mode):
    check_rotary_mul(op, input, r1, r2, rotary_mode)
    check(grad.shape == input.shape and grad.dtype in DTYPES, op, "grad",
          f"must have input's shape {list(input.shape)} and a float dtype, got "
          f"{list(grad.shape)} {grad.dtype}")


def _sum_to(v, shape):
    """v summed over the dims where ``shape`` has 1 and v does not (kept as 1)."""
    dims = [i for i, (a, b) in enumerate(zip(shape, v.shape)) if a == 1 and b != 1]
    return v.sum(dims, keepdim=True) if dims else v


def _backward(grad, input, r1, r2, rotary_mode, rotate=None):
    """(dx, dr1, dr2) in float32: dx = A^T(g * r1) + B^T(g * r2), dr1 = sum(g * A(x)),
    dr2 = sum(g * B(x)) over r1's broadcast dims."""
    g = grad.to(input.dtype).float()
    a, b, r1f, r2f = _parts(input, r1, r2, rotary_mode, rotate)
    if rotate is not None:
        dx = g * r1f + (g * r2f) @ rotate.float().t()
    else:
        pa, pb, sb = rotation(rotary_mode, input.shape[-1], input.device)
        ga = g * r1f
        dx = (ga if pa is None else ga.index_select(-1, _inverse(pa))) + \
            (g * r2f * sb).index_select(-1, _inverse(pb))
    return dx, _sum_to(g * a, r1.shape), _sum_to(g * b, r2.shape)


def rotary_mul_backward_reference(grad, input, r1, r2, rotary_mode="half"):
    """ops-transformer's RotaryPositionEmbeddingGrad in float32, each output rounded once to
    input's dtype: dx in input's layout, dr1 / dr2 in r1's / r2's (torch_npu's Meta)."""
    check_rotary_mul_backward("npu_rotary_mul_backward", grad, input, r1, r2, rotary_mode)
    dx, dr1, dr2 = _backward(grad, input, r1, r2, rotary_mode)
    return (torch.empty_like(input).copy_(dx), torch.empty_like(r1, dtype=input.dtype).copy_(dr1),
            torch.empty_like(r2, dtype=input.dtype).copy_(dr2))


def rotary_mul_backward_fake(grad, input, r1, r2, rotary_mode="half"):
    check_rotary_mul_backward("npu_rotary_mul_backward", grad, input, r1, r2, rotary_mode)
    return (torch.empty_like(input), torch.empty_like(r1, dtype=input.dtype),
            torch.empty_like(r2, dtype=input.dtype))


def _rotary_mul_setup(ctx, inputs, output):
    input, r1, r2 = inputs[:3]
    ctx.mode = inputs[3] if len(inputs) > 3 else "half"
    rotate = inputs[4] if len(inputs) > 4 else None
    ctx.has_rotate = rotate is not None
    ctx.save_for_backward(input, r1, r2, rotate)


def _rotary_mul_backward(ctx, grad):
    input, r1, r2, rotate = ctx.saved_tensors
    if ctx.has_rotate:  # not differentiable through rotate (torch_npu's derivatives.yaml)
        dx, dr1, dr2 = _backward(grad, input, r1, r2, ctx.mode, rotate)
    else:
        dx, dr1, dr2 = torch.ops.npu.npu_rotary_mul_backward(grad, input, r1, r2, ctx.mode)
    return dx.to(input.dtype), dr1.to(r1.dtype), dr2.to(r2.dtype), None, None


def rotary_mul_cuda(input, r1, r2, rotary_mode="half", rotate=None):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/rotary.py) without ``rotate``; with it
    (a matrix product) the reference runs."""
    from op_sdk.triton_kernels import rotary

    if rotate is not None:
        return rotary_mul_reference(input, r1, r2, rotary_mode, rotate)
    out = rotary_mul_fake(input, r1, r2, rotary_mode, rotate)
    return rotary.run(input, r1.to(input.dtype), r2.to(input.dtype), MODES[rotary_mode], out)


def rotary_mul_backward_cuda(grad, input, r1, r2, rotary_mode="half"):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/rotary.py: dx and the products of r1 /
    r2's gradients in one pass; the products summed over r1's broadcast dims by the
    reference's reduction, ``_sum_to``)."""
    from op_sdk.triton_kernels import rotary

    outs = rotary_mul_backward_fake(grad, input, r1, r2, rotary_mode)
    return rotary.run_backward(grad, input, r1.to(input.dtype), r2.to(input.dtype),
                               MODES[rotary_mode], outs, _sum_to)


def _bench_inputs(t, h, dt):
    """t tokens of h // 128 heads of 128 (TND), cos / sin per token (T1D)."""
    heads = max(1, h // 128)
    return (bench_randn(t, heads, 128, dtype=dt), bench_randn(t, 1, 128, dtype=dt),
            bench_randn(t, 1, 128, dtype=dt)), {}


prototypes.declare("aclnnRotaryPositionEmbeddingV2",
                   "const aclTensor* x, const aclTensor* cos, const aclTensor* sin, "
                   "int64_t mode, const aclTensor* rotate, aclTensor* out",
                   prototypes.CANN_HEADERS + "aclnn_rotary_position_embedding_v2.h",
                   # "可选输入" (ops-transformer docs/aclnnRotaryPositionEmbeddingV2.md)
                   nullable=("rotate",))


def _mode_bindings(api, outputs, rename, modes):
    """One binding per rotary_mode: aclnn takes the mode as an integer."""
    return by_value(api, "rotary_mode", {m: {"mode": str(MODES[m])} for m in modes},
                    outputs=outputs, rename=rename)


npu_rotary_mul = define_op(
    "npu_rotary_mul(Tensor input, Tensor r1, Tensor r2, str rotary_mode='half', "
    "Tensor? rotate=None) -> Tensor",
    kernels={"cuda": TritonKernel(rotary_mul_cuda)},
    reference=rotary_mul_reference, fake=rotary_mul_fake, native=("cpu",),
    # the CPU launcher routes calls with `rotate` (and invalid ones) to the reference
    reference_op=True,
    aclnn=_mode_bindings("aclnnRotaryPositionEmbeddingV2", ("out",),
                         {"x": "input", "cos": "r1", "sin": "r2"}, list(MODES)),
    backward=_rotary_mul_backward, setup_context=_rotary_mul_setup,
    benchmarks=(Benchmark(_bench_inputs),),
    doc="Rotary position embedding A(x) * r1 + B(x) * r2 along the last dim (float32 inside).",
)

prototypes.declare("aclnnRotaryPositionEmbeddingGrad",
                   "const aclTensor* dy, const aclTensor* cos, const aclTensor* sin, "
                   "const aclTensor* xOptional, int64_t mode, aclTensor* dxOut, "
                   "aclTensor* dcosOut, aclTensor* dsinOut",
                   prototypes.CANN_HEADERS + "aclnn_rotary_position_embedding_grad.h")

npu_rotary_mul_backward = define_op(
    "npu_rotary_mul_backward(Tensor grad, Tensor input, Tensor r1, Tensor r2, "
    "str rotary_mode='half') -> (Tensor, Tensor, Tensor)",
    reference=rotary_mul_backward_reference, fake=rotary_mul_backward_fake,
    kernels={"cuda": TritonKernel(rotary_mul_backward_cuda)},
    aclnn=_mode_bindings("aclnnRotaryPositionEmbeddingGrad", ("dx", "dcos", "dsin"),
                         {"dy": "grad", "xOptional": "input", "cos": "r1", "sin": "r2"},
                         list(MODES)),
    doc="The gradients of npu_rotary_mul with respect to input, r1 and r2 (float32 inside).",
)
