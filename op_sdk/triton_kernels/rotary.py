"""The Triton kernel of npu_rotary_mul (ops/rotary_mul.py's contract), without ``rotate``:
``y[i] = x[pa[i]] * r1[i] + (sb[i] * x[pb[i]]) * r2[i]`` along the last dim, the mode's
permutations and signs read from ``ops.rotary_mul.rotation`` (one definition of each mode),
r1 / r2 broadcast through stride-0 views. float32 inside, each product rounded before the
sum (``_common.mul``): the reference's bits.

``input`` is read in (rows, d) tiles (``_common.tile``): the permutations and signs are
loaded once per tile, r1 / r2's row offsets computed once per row (no element index is
divided), and the permuted reads of x stay inside the tile's rows.
"""

from __future__ import annotations

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import Outputs, mul, tile, tiled


@triton.jit
def _rotary(x_ptr, r1_ptr, r2_ptr, pa_ptr, pb_ptr, sb_ptr, y_ptr, rows, d, s1, s2,
            st0, st1, st2, st3, HAS_A: tl.constexpr,
            BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, WIDE: tl.constexpr):
    r, c, m = tile(rows, d, BLOCK_R, BLOCK_C, WIDE)
    cm = c < d
    base = r[:, None] * d
    # r1 / r2 of input's shape (..., s1, s2, d) through their broadcast strides
    ro = ((r // (s1 * s2)) * st0 + ((r // s2) % s1) * st1 + (r % s2) * st2)[:, None] \
        + (c * st3)[None, :]
    pb = tl.load(pb_ptr + c, mask=cm, other=0).to(r.dtype)
    sb = tl.load(sb_ptr + c, mask=cm, other=0.0)
    if HAS_A:
        pa = tl.load(pa_ptr + c, mask=cm, other=0).to(r.dtype)
        a = tl.load(x_ptr + base + pa[None, :], mask=m, other=0.0)
    else:
        a = tl.load(x_ptr + base + c[None, :], mask=m, other=0.0)
    b = tl.load(x_ptr + base + pb[None, :], mask=m, other=0.0).to(tl.float32) * sb[None, :]
    co = tl.load(r1_ptr + ro, mask=m, other=0.0).to(tl.float32)
    si = tl.load(r2_ptr + ro, mask=m, other=0.0).to(tl.float32)
    y = mul(a.to(tl.float32), co, m) + mul(b, si, m)
    tl.store(y_ptr + base + c[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


def run(input, r1, r2, rotation, out):
    """npu_rotary_mul of ``input`` with r1 / r2 (input's dtype) and the mode's ``rotation``
    (pa or None, pb, sb) into ``out`` (its fake's allocation); returns it."""
    o = Outputs(out)
    pa, pb, sb = rotation
    shape = [1] * (4 - input.dim()) + list(input.shape)
    r1e = r1.reshape([1] * (4 - r1.dim()) + list(r1.shape)).expand(shape)
    r2e = r2.reshape([1] * (4 - r2.dim()) + list(r2.shape)).expand(shape)
    if r1e.stride() != r2e.stride():
        r1e, r2e = r1e.contiguous(), r2e.contiguous()
    d = shape[3]
    rows = input.numel() // d
    tiled(_rotary, rows, d, input.contiguous(), r1e, r2e, pb if pa is None else pa, pb, sb,
          o.bufs[0], rows, d, shape[1], shape[2], *r1e.stride(), HAS_A=pa is not None)
    return o.done()[0]
