"""The Triton kernel of npu_quantize (ops/quantize.py's contract): static quantisation with
per-channel (or per-tensor) scales and zero points, to int8 or uint8.

``input`` is read as (outer, C, inner) around the channel axis, in (rows, cols) tiles
(``_common.tile``): for the last axis (inner 1) the rows are ``outer`` and the channel is the
column, loaded once per tile; otherwise the rows are ``outer * C`` (channel ``row % C``, one
per row of the tile) and the columns ``inner``. Per element: ``v = x / scale[c]``
(``div_mode``; else ``x * scale[c]``) ``+ zero_point[c]`` in fp32, rounded half to even and
saturated (``_common.round_saturate``): the reference's bits.
"""

from __future__ import annotations

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import Outputs, div, mul, round_saturate, tile, tiled


@triton.jit
def _quantize(x_ptr, s_ptr, z_ptr, q_ptr, rows, cols, channels, lo, hi,
              S_PER: tl.constexpr, Z_PER: tl.constexpr, HAS_Z: tl.constexpr,
              DIV: tl.constexpr, LAST: tl.constexpr,
              BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, WIDE: tl.constexpr):
    r, c, m = tile(rows, cols, BLOCK_R, BLOCK_C, WIDE)
    at = r[:, None] * cols + c[None, :]
    x = tl.load(x_ptr + at, mask=m, other=0.0).to(tl.float32)
    # the channel of each element: its column (LAST), else its row's; a per-tensor value: 0
    if LAST:
        ch = c[None, :]
        cm = (c < cols)[None, :]
    else:
        ch = (r % channels)[:, None]
        cm = (r < rows)[:, None]
    s = tl.load(s_ptr + (ch if S_PER else ch * 0), mask=cm, other=1.0).to(tl.float32)
    v = div(x, tl.broadcast_to(s, (BLOCK_R, BLOCK_C))) if DIV else mul(x, s, m)
    if HAS_Z:
        v = v + tl.load(z_ptr + (ch if Z_PER else ch * 0), mask=cm, other=0).to(tl.float32)
    # float arguments arrive as fp64 from Inductor's launcher; the rounding is fp32's
    lo, hi = tl.cast(lo, tl.float32), tl.cast(hi, tl.float32)
    tl.store(q_ptr + at, round_saturate(v, lo, hi).to(q_ptr.dtype.element_ty), mask=m)


def run(input, scales, zero_points, axis, div_mode, out, lo, hi):
    """npu_quantize of ``input`` along ``axis`` (non-negative) into ``out`` (its fake's
    allocation), saturating to [lo, hi]; returns it."""
    o = Outputs(out)
    inner = 1
    for d in input.shape[axis + 1:]:
        inner *= d
    channels = input.shape[axis]
    last = inner == 1
    rows = input.numel() // (channels * inner) if channels * inner else 0
    rows, cols = (rows, channels) if last else (rows * channels, inner)
    s = scales.reshape(-1).contiguous()
    z = s if zero_points is None else zero_points.reshape(-1).contiguous()
    tiled(_quantize, rows, cols, input.contiguous(), s, z, o.bufs[0], rows, cols, channels,
          float(lo), float(hi), S_PER=s.numel() > 1, Z_PER=z.numel() > 1,
          HAS_Z=zero_points is not None, DIV=bool(div_mode), LAST=last)
    return o.done()[0]
