"""The Triton kernel of npu_rotary_mul (ops/rotary_mul.py's contract), without ``rotate``:
``y[i] = x[pa[i]] * r1[i] + (sb[i] * x[pb[i]]) * r2[i]`` along the last dim, the mode's
permutations and signs read from ``ops.rotary_mul.rotation`` (one definition of each mode),
r1 / r2 broadcast through stride-0 views. float32 inside, each product rounded before the
sum (``_common.mul``): the reference's bits.
"""

from __future__ import annotations

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import Outputs, elementwise, mul, offsets


@triton.jit
def _rotary(x_ptr, r1_ptr, r2_ptr, pa_ptr, pb_ptr, sb_ptr, y_ptr, total, d, s1, s2,
            st0, st1, st2, st3, HAS_A: tl.constexpr, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    i = offsets(BLOCK, WIDE)
    m = i < total
    row = i // d
    col = i - row * d
    base = row * d
    # r1 / r2 of input's shape (..., s1, s2, d) through their broadcast strides
    ro = (row // (s1 * s2)) * st0 + ((row // s2) % s1) * st1 + (row % s2) * st2 + col * st3
    pb = tl.load(pb_ptr + col, mask=m, other=0)
    sb = tl.load(sb_ptr + col, mask=m, other=0.0)
    if HAS_A:
        a = tl.load(x_ptr + base + tl.load(pa_ptr + col, mask=m, other=0), mask=m, other=0.0)
    else:
        a = tl.load(x_ptr + i, mask=m, other=0.0)
    b = tl.load(x_ptr + base + pb, mask=m, other=0.0).to(tl.float32) * sb
    c = tl.load(r1_ptr + ro, mask=m, other=0.0).to(tl.float32)
    s = tl.load(r2_ptr + ro, mask=m, other=0.0).to(tl.float32)
    tl.store(y_ptr + i, (mul(a.to(tl.float32), c, m) + mul(b, s, m)).to(y_ptr.dtype.element_ty), mask=m)


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
    elementwise(_rotary, input.numel(), input.contiguous(), r1e, r2e,
                pb if pa is None else pa, pb, sb, o.bufs[0], input.numel(), shape[3], shape[1],
                shape[2], *r1e.stride(), HAS_A=pa is not None)
    return o.done()[0]
