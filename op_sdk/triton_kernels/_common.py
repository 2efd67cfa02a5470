"""Pieces every op_sdk Triton kernel shares: the contract's rounding rules written once in
Triton, the launch geometry, and the output handling of the launchers.

Portable subset (docs/triton.md): tl.load / tl.store with masks, tl.arange, tl.sum / tl.max
over one axis, tl.where, tl.minimum / tl.maximum, casts with ``.to``, tl.exp, and
correctly rounded fp32 division and square root (``tl.math.div_rn``, ``tl.sqrt_rn``), kept
behind ``div`` / ``sqrt`` here. No inline assembly, no libdevice, no atomics, no float64.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

# rows one program holds in registers at once; longer rows run the operator's reference
MAX_ROW = 16384
# 1.5 * 2^23: adding and subtracting it rounds an fp32 |v| < 2^22 to an integer, half to even
_RNE = tl.constexpr(12582912.0)


@triton.jit
def div(a, b):
    """a / b, correctly rounded (the contract's divisions are IEEE fp32 divisions)."""
    return tl.math.div_rn(a, b)


@triton.jit
def sqrt(a):
    return tl.sqrt_rn(a)


@triton.jit
def round_saturate(v, lo, hi):
    """The contract's float -> integer store (ops/_common.py quantize_round) for a range
    inside +-2^22 (int8, uint8, int4): round half to even, saturate to [lo, hi] (+-inf to
    the bounds), NaN 0; an fp32 holding an integer, for a cast to the store's type."""
    nan = v != v
    c = tl.minimum(tl.maximum(v, lo), hi)
    r = (c + _RNE) - _RNE
    return tl.where(nan, 0.0, r)


@triton.jit
def store_int8(v):
    return round_saturate(v, -128.0, 127.0).to(tl.int8)


@triton.jit
def absmax(v, mask):
    """max |v| over the masked row, NaN propagating (ops/_common.py absmax)."""
    a = tl.where(mask, tl.abs(v), 0.0)
    has_nan = tl.max(tl.where(mask & (v != v), 1, 0), axis=0)
    return tl.where(has_nan > 0, float("nan"), tl.max(a, axis=0))


@functools.lru_cache(maxsize=None)
def _programs_cap(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count * 16
    return 1 << 30  # the interpreter: one program per row


def row_launch(rows: int, block: int, elem_bytes: int, device: torch.device) -> dict:
    """Grid and warps of a kernel whose program handles whole rows of ``block`` elements
    (rows loop inside the program: the grid stays under the Ascend core counts' limits)."""
    programs = max(1, min(rows, _programs_cap(device)))
    warps = max(1, min(16, block * elem_bytes // 1024))
    return {"grid": (programs,), "num_warps": warps, "programs": programs}


def options(device: torch.device) -> dict:
    """Compile options of every launch. On CUDA, no fp contraction: Triton would otherwise
    fuse a multiply and the add after it into one fma (one rounding where the contract has
    two: ``v * scale + zero_point``, ``x * rstd * gamma + beta``)."""
    return {"enable_fp_fusion": False} if device.type == "cuda" else {}


# an elementwise kernel's program: BLOCK consecutive elements, in ELEMENTWISE_WARPS warps
ELEMENTWISE_BLOCK = 1024
ELEMENTWISE_WARPS = 4


def elementwise(kernel, total: int, *args, **constexprs) -> None:
    """Launch an elementwise kernel (a ``BLOCK`` constexpr; program i handles elements
    [i * BLOCK, (i + 1) * BLOCK)) over ``total`` elements; nothing when there are none."""
    if total:
        device = next(a.device for a in args if isinstance(a, torch.Tensor))
        kernel[(triton.cdiv(total, ELEMENTWISE_BLOCK),)](
            *args, **constexprs, BLOCK=ELEMENTWISE_BLOCK, num_warps=ELEMENTWISE_WARPS,
            **options(device))


def block_for(n: int) -> int:
    return max(16, triton.next_power_of_2(n))


def rows_of(t: torch.Tensor, n: int) -> torch.Tensor:
    """t as a contiguous (rows, n) matrix (a copy only when t is not contiguous)."""
    return t.contiguous().view(-1, n) if n else t.reshape(-1, 0)


class Outputs:
    """Outputs allocated as the operator's fake allocates them; a kernel writes dense rows,
    so an output in another layout is written through a contiguous buffer and copied."""

    def __init__(self, *outs: torch.Tensor):
        self.outs = outs
        self.bufs = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype,
                                                             device=o.device)
                     for o in outs]

    def done(self):
        for o, b in zip(self.outs, self.bufs):
            if b is not o:
                o.copy_(b)
        return self.outs
