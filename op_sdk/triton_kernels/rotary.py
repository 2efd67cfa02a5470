"""The Triton kernel of npu_rotary_mul (ops/rotary_mul.py's contract), without ``rotate``:
``y[i] = x[pa[i]] * r1[i] + (sb[i] * x[pb[i]]) * r2[i]`` along the last dim, r1 / r2
broadcast through stride-0 views. float32 inside, each product rounded before the sum
(``_common.mul``): the reference's bits.

Every mode rotates disjoint pairs: for j in [0, d / 2), outputs ``o1`` and ``o2`` read inputs
``i1`` and ``i2`` (``i1 = pa[o1]``, ``i2 = pb[o1] = pa[o2]``, ``sb[o1] = -1``)::

    y[o1] = x[i1] * r1[o1] + (-x[i2]) * r2[o1]
    y[o2] = x[i2] * r1[o2] + x[i1] * r2[o2]

``_pairs`` gives o1, o2, i1, i2 as arithmetic on j for each mode, so each of the four is a
contiguous or evenly strided vector (no gathered loads); tests/triton/test_kernels.py checks
them against the mode's permutations and signs (``ops.rotary_mul.rotation``, the one
definition of each mode). ``input`` is read in (rows, d / 2) tiles (``_common.tile``), r1 /
r2's row offsets computed once per row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from op_sdk.triton_kernels._common import Outputs, div, mul, sqrt, tile, tiled

# pairs per program (twice as many outputs): the old one-output-per-lane kernel was fastest
# at 1024 outputs per program on an H200 (benchmarks/results/sweep_tiles_h200_gather.json)
TILE = 512


@triton.jit
def _pairs(j, MODE: tl.constexpr, D: tl.constexpr):
    """(o1, o2, i1, i2) of pair j < D / 2 in mode MODE (the mode's code in
    ops.rotary_mul.MODES, aclnn's: 0 half, 1 interleave, 2 quarter, 3 interleave-half)."""
    if MODE == 1:  # interleave: (2j, 2j + 1) rotate in place
        o1 = 2 * j
        o2 = o1 + 1
        i1, i2 = o1, o2
    elif MODE == 2:  # quarter: half of each half
        o1 = j + (j // (D // 4)) * (D // 4)
        o2 = o1 + D // 4
        i1, i2 = o1, o2
    elif MODE == 3:  # interleave-half: the evens and odds to the two halves
        o1 = j
        o2 = j + D // 2
        i1 = 2 * j
        i2 = i1 + 1
    else:  # half
        o1 = j
        o2 = j + D // 2
        i1, i2 = o1, o2
    return o1, o2, i1, i2


@triton.jit
def _pair_factors(r1_ptr, r2_ptr, ro, o1, o2, st3, m):
    """r1[o1], r2[o1], r1[o2], r2[o2] as float32 tiles, read at row offsets ``ro`` and
    column stride ``st3``."""
    c1 = tl.load(r1_ptr + ro + (o1 * st3)[None, :], mask=m, other=0.0).to(tl.float32)
    s1 = tl.load(r2_ptr + ro + (o1 * st3)[None, :], mask=m, other=0.0).to(tl.float32)
    c2 = tl.load(r1_ptr + ro + (o2 * st3)[None, :], mask=m, other=0.0).to(tl.float32)
    s2 = tl.load(r2_ptr + ro + (o2 * st3)[None, :], mask=m, other=0.0).to(tl.float32)
    return c1, s1, c2, s2


@triton.jit
def _row_offsets(r, s1, s2, st0, st1, st2):
    """Row r's offset in r1 / r2 of input's shape (..., s1, s2, d), through their broadcast
    strides."""
    return ((r // (s1 * s2)) * st0 + ((r // s2) % s1) * st1 + (r % s2) * st2)[:, None]


@triton.jit
def _rotate(x1, x2, r1_ptr, r2_ptr, ro, o1, o2, st3, m):
    """The pair (o1, o2) of inputs x1 / x2 (float32 tiles): ``x1 * r1[o1] - x2 * r2[o1]`` and
    ``x2 * r1[o2] + x1 * r2[o2]``, r1 / r2 read at row offsets ``ro`` and column stride
    ``st3``; each product rounded before the sum (``_common.mul``)."""
    c1, s1, c2, s2 = _pair_factors(r1_ptr, r2_ptr, ro, o1, o2, st3, m)
    return mul(x1, c1, m) + mul(-x2, s1, m), mul(x2, c2, m) + mul(x1, s2, m)


@triton.jit
def _rotary(x_ptr, r1_ptr, r2_ptr, y_ptr, rows, s1, s2, st0, st1, st2, st3,
            MODE: tl.constexpr, D: tl.constexpr,
            BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, WIDE: tl.constexpr):
    r, j, m = tile(rows, D // 2, BLOCK_R, BLOCK_C, WIDE)
    o1, o2, i1, i2 = _pairs(j, MODE, D)
    base = r[:, None] * D
    ro = _row_offsets(r, s1, s2, st0, st1, st2)
    x1 = tl.load(x_ptr + base + i1[None, :], mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + i2[None, :], mask=m, other=0.0).to(tl.float32)
    y1, y2 = _rotate(x1, x2, r1_ptr, r2_ptr, ro, o1, o2, st3, m)
    tl.store(y_ptr + base + o1[None, :], y1.to(y_ptr.dtype.element_ty), mask=m)
    tl.store(y_ptr + base + o2[None, :], y2.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rotary_backward(g_ptr, x_ptr, r1_ptr, r2_ptr, dx_ptr, pa_ptr, pb_ptr, rows, s1, s2, st0,
                     st1, st2, st3, MODE: tl.constexpr, D: tl.constexpr, BLOCK_R: tl.constexpr,
                     BLOCK_C: tl.constexpr, WIDE: tl.constexpr):
    """npu_rotary_mul_backward's elementwise part, pair by pair (``_pairs``; forward
    ``y[o1] = x[i1] r1[o1] - x[i2] r2[o1]``, ``y[o2] = x[i2] r1[o2] + x[i1] r2[o2]``):
    ``dx[i1] = g[o1] r1[o1] + g[o2] r2[o2]``, ``dx[i2] = g[o2] r1[o2] - g[o1] r2[o1]``, each
    product rounded; and the products r1 / r2's gradients sum, ``g A(x)`` into pa (``g[o1]
    x[i1]``, ``g[o2] x[i2]``) and ``g B(x)`` into pb (``-g[o1] x[i2]``, ``g[o2] x[i1]``), in
    fp32 or already rounded to their output's dtype (pa / pb's element type)."""
    r, j, m = tile(rows, D // 2, BLOCK_R, BLOCK_C, WIDE)
    o1, o2, i1, i2 = _pairs(j, MODE, D)
    base = r[:, None] * D
    ro = _row_offsets(r, s1, s2, st0, st1, st2)
    out_ty = dx_ptr.dtype.element_ty  # (grad rounded to input's dtype first)
    g1 = tl.load(g_ptr + base + o1[None, :], mask=m, other=0.0).to(out_ty).to(tl.float32)
    g2 = tl.load(g_ptr + base + o2[None, :], mask=m, other=0.0).to(out_ty).to(tl.float32)
    x1 = tl.load(x_ptr + base + i1[None, :], mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + base + i2[None, :], mask=m, other=0.0).to(tl.float32)
    c1, s1v, c2, s2v = _pair_factors(r1_ptr, r2_ptr, ro, o1, o2, st3, m)
    d1 = mul(g1, c1, m) + mul(g2, s2v, m)
    d2 = mul(g2, c2, m) + mul(-g1, s1v, m)
    tl.store(dx_ptr + base + i1[None, :], d1.to(out_ty), mask=m)
    tl.store(dx_ptr + base + i2[None, :], d2.to(out_ty), mask=m)
    p_ty = pa_ptr.dtype.element_ty
    tl.store(pa_ptr + base + o1[None, :], (g1 * x1).to(p_ty), mask=m)
    tl.store(pa_ptr + base + o2[None, :], (g2 * x2).to(p_ty), mask=m)
    tl.store(pb_ptr + base + o1[None, :], (g1 * -x2).to(p_ty), mask=m)
    tl.store(pb_ptr + base + o2[None, :], (g2 * x1).to(p_ty), mask=m)


def _as_4d(x, r1, r2):
    """x's shape padded in front to 4 dims, and r1 / r2 expanded to it (broadcast dims as
    stride 0, one set of strides for both: the kernels index them alike)."""
    shape = [1] * (4 - x.dim()) + list(x.shape)
    r1e = r1.reshape([1] * (4 - r1.dim()) + list(r1.shape)).expand(shape)
    r2e = r2.reshape([1] * (4 - r2.dim()) + list(r2.shape)).expand(shape)
    if r1e.stride() != r2e.stride():
        r1e, r2e = r1e.contiguous(), r2e.contiguous()
    return shape, r1e, r2e


def run(input, r1, r2, mode, out):
    """npu_rotary_mul of ``input`` with r1 / r2 (input's dtype) in ``mode`` (its code in
    ops.rotary_mul.MODES) into ``out`` (its fake's allocation); returns it."""
    o = Outputs(out)
    shape, r1e, r2e = _as_4d(input, r1, r2)
    d = shape[3]
    rows = input.numel() // d
    tiled(_rotary, rows, d // 2, input.contiguous(), r1e, r2e, o.bufs[0], rows, shape[1],
          shape[2], *r1e.stride(), MODE=mode, D=d, tile=TILE)
    return o.done()[0]


def run_backward(grad, input, r1, r2, mode, outs, sum_to):
    """npu_rotary_mul_backward of grad / input (input's dtype) with r1 / r2 (input's dtype)
    in ``mode`` into ``outs`` = (dx, dr1, dr2) (their fake's allocations). dx is written by
    the kernel; dr1 / dr2 are the products' sums over r1's broadcast dims (``sum_to``, the
    reference's reduction) where r1 broadcasts, else the kernel's products themselves.
    Returns ``outs``."""
    o = Outputs(*outs)
    shape, r1e, r2e = _as_4d(input, r1, r2)
    d = shape[3]
    rows = input.numel() // d
    # no broadcast dim: the products are the gradients, written in their dtype
    whole = tuple(r1.shape) == tuple(r2.shape) == tuple(input.shape)
    if whole:
        pa, pb = o.bufs[1], o.bufs[2]
    else:
        pa = torch.empty(input.shape, dtype=torch.float32, device=input.device)
        pb = torch.empty_like(pa)
    tiled(_rotary_backward, rows, d // 2, grad.contiguous(), input.contiguous(), r1e, r2e,
          o.bufs[0], pa, pb, rows, shape[1], shape[2], *r1e.stride(), MODE=mode, D=d,
          tile=TILE)
    if not whole:
        o.bufs[1].copy_(sum_to(pa, o.bufs[1].shape))
        o.bufs[2].copy_(sum_to(pb, o.bufs[2].shape))
    return o.done()


@triton.jit
def _rms_norm_rope(x_ptr, g_ptr, r1_ptr, r2_ptr, y_ptr, rows, s1, s2, xt0, xt1, xt2, st0, st1, st2, st3, eps,
                   D: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, WIDE: tl.constexpr):
    """op_sdk::rms_norm_rope: a program holds whole rows (BLOCK_C >= D / 2: j walks the pairs
    of the "half" mode, (j, j + D / 2)); x read through its leading strides (its last dim
    contiguous: Qwen3's transposed view in place), y contiguous."""
    r, j, m = tile(rows, D // 2, BLOCK_R, BLOCK_C, WIDE)
    o2 = j + D // 2
    lead0, lead1, lead2 = r // (s1 * s2), (r // s2) % s1, r % s2
    xo = (lead0 * xt0 + lead1 * xt1 + lead2 * xt2)[:, None]
    ro = (lead0 * st0 + lead1 * st1 + lead2 * st2)[:, None]
    x1 = tl.load(x_ptr + xo + j[None, :], mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + xo + o2[None, :], mask=m, other=0.0).to(tl.float32)
    # npu_rms_norm's y: rstd = 1 / sqrt(mean(x^2) + eps), t = (x * rstd) * gamma rounded to x's
    # dtype (the sum of squares in another order than the CPU kernel's: within its fp32 error)
    ss = tl.sum(mul(x1, x1, m), axis=1) + tl.sum(mul(x2, x2, m), axis=1)
    rstd = div(1.0, sqrt(div(ss, D * 1.0) + eps))[:, None]
    g1 = tl.load(g_ptr + j, mask=j < D // 2, other=0.0).to(tl.float32)[None, :]
    g2 = tl.load(g_ptr + o2, mask=j < D // 2, other=0.0).to(tl.float32)[None, :]
    t1 = mul(mul(x1, rstd, m), g1, m).to(y_ptr.dtype.element_ty).to(tl.float32)
    t2 = mul(mul(x2, rstd, m), g2, m).to(y_ptr.dtype.element_ty).to(tl.float32)
    # npu_rotary_mul's "half" pair
    y1, y2 = _rotate(t1, t2, r1_ptr, r2_ptr, ro, j, o2, st3, m)
    base = r[:, None] * D
    tl.store(y_ptr + base + j[None, :], y1.to(y_ptr.dtype.element_ty), mask=m)
    tl.store(y_ptr + base + o2[None, :], y2.to(y_ptr.dtype.element_ty), mask=m)


def run_rms_norm_rope(x, gamma, cos, sin, eps, out):
    """op_sdk::rms_norm_rope of x (its last dim contiguous, else copied) with gamma and cos /
    sin (x's dtype) into ``out`` (its fake's allocation); returns it."""
    o = Outputs(out)
    if x.stride(-1) != 1:
        x = x.contiguous()
    shape, c, s = _as_4d(x, cos, sin)
    xs = [0] * (4 - x.dim()) + list(x.stride())
    d = shape[3]
    rows = x.numel() // d
    tiled(_rms_norm_rope, rows, d // 2, x, gamma.contiguous(), c, s, o.bufs[0], rows, shape[1], shape[2],
          *xs[:3], *c.stride(), float(eps), D=d, tile=2 * TILE)
    return o.done()[0]
