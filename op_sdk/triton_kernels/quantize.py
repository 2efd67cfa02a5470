"""The Triton kernel of npu_quantize (ops/quantize.py's contract): static quantisation with
per-channel (or per-tensor) scales and zero points, to int8 or uint8.

``input`` is read as (outer, C, inner) around the channel axis; one elementwise pass:
``v = x / scale[c]`` (``div_mode``; else ``x * scale[c]``) ``+ zero_point[c]`` in fp32,
rounded half to even and saturated (``_common.round_saturate``): the reference's bits.
"""

from __future__ import annotations

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import Outputs, div, elementwise, mul, offsets, round_saturate


@triton.jit
def _quantize(x_ptr, s_ptr, z_ptr, q_ptr, total, inner, channels, lo, hi,
              S_PER: tl.constexpr, Z_PER: tl.constexpr, HAS_Z: tl.constexpr,
              DIV: tl.constexpr, BLOCK: tl.constexpr, WIDE: tl.constexpr):
    i = offsets(BLOCK, WIDE)
    m = i < total
    c = (i // inner) % channels
    x = tl.load(x_ptr + i, mask=m, other=0.0).to(tl.float32)
    s = tl.load(s_ptr + (c if S_PER else c * 0), mask=m, other=1.0).to(tl.float32)
    v = div(x, s) if DIV else mul(x, s, m)
    if HAS_Z:
        v = v + tl.load(z_ptr + (c if Z_PER else c * 0), mask=m, other=0).to(tl.float32)
    # float arguments arrive as fp64 from Inductor's launcher; the rounding is fp32's
    lo, hi = tl.cast(lo, tl.float32), tl.cast(hi, tl.float32)
    tl.store(q_ptr + i, round_saturate(v, lo, hi).to(q_ptr.dtype.element_ty), mask=m)


def run(input, scales, zero_points, axis, div_mode, out, lo, hi):
    """npu_quantize of ``input`` along ``axis`` (non-negative) into ``out`` (its fake's
    allocation), saturating to [lo, hi]; returns it."""
    o = Outputs(out)
    inner = 1
    for d in input.shape[axis + 1:]:
        inner *= d
    s = scales.reshape(-1).contiguous()
    z = s if zero_points is None else zero_points.reshape(-1).contiguous()
    elementwise(_quantize, input.numel(), input.contiguous(), s, z, o.bufs[0], input.numel(),
                inner, input.shape[axis], float(lo), float(hi), S_PER=s.numel() > 1,
                Z_PER=z.numel() > 1, HAS_Z=zero_points is not None, DIV=bool(div_mode))
    return o.done()[0]
