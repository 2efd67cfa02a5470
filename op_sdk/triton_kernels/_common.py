"""Pieces every op_sdk Triton kernel shares: the contract's rounding rules written once in
Triton, the launch geometry and launch (eager, or traced for Inductor), and the output
handling of the launchers.

Portable subset (docs/triton.md): tl.load / tl.store with masks, tl.arange, tl.sum / tl.max
over one axis, tl.where, tl.minimum / tl.maximum, casts with ``.to``, tl.exp, and
correctly rounded fp32 division and square root (``tl.math.div_rn``, ``tl.sqrt_rn``), kept
behind ``div`` / ``sqrt`` here. No inline assembly, no libdevice, no atomics, no float64.

The kernels compile with Triton's default options (also when Inductor compiles them as
user-defined kernels, where no compile option can be passed): the contract's separately
rounded products are written with ``mul``, which no fp contraction can fuse into an add.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from op_sdk.triton_kernels import tracing

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
def mul(a, b, mask):
    """a * b, rounded on its own before any add that consumes it (the references round each
    product and each sum): the product goes through a select on the lanes' runtime mask,
    across which no compiler contracts a multiply and an add into one fma
    (tests/triton/test_compile_sm90.py checks the PTX). Masked-off lanes hold ``a`` (not a
    constant: two such selects added would otherwise fold into one select of the sum, whose
    multiplies LLVM contracts)."""
    return tl.where(mask, a * b, a)


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


def row_launch(rows: int, block: int, elem_bytes: int, device: torch.device,
               quant: bool = False) -> dict:
    """Grid and warps of a kernel whose program handles whole rows of ``block`` elements
    (rows loop inside the program: the grid stays under the Ascend core counts' limits);
    ``rows`` >= 1, a symbolic size under dynamic shapes (no guard on it here). One warp per
    2 KiB of row, at most 4 (8 for the quantising forms, which hold more per row): the best
    or within a few percent of it in the sweep of benchmarks/sweep_rows.py on an H200
    (benchmarks/results/sweep_rows_h200.json, 4096 rows of 4096 and 7168)."""
    programs = torch.sym_min(rows, _programs_cap(device))
    warps = max(1, min(8 if quant else 4, block * elem_bytes // 2048))
    return {"grid": (programs,), "num_warps": warps, "programs": programs}


@triton.jit
def offsets(BLOCK: tl.constexpr, WIDE: tl.constexpr):
    """The element indices of this program of an elementwise kernel: [pid * BLOCK, (pid + 1)
    * BLOCK), in int32 where every index the kernel forms fits (``WIDE`` False: its tensors
    hold fewer than 2^31 elements; a 32-bit division is a fraction of a 64-bit one on a GPU,
    and triton-ascend runs 64-bit indices as scalar code), else in int64."""
    if WIDE:
        i = tl.cast(tl.program_id(0), tl.int64) * BLOCK + tl.arange(0, BLOCK)
    else:
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    return i


# an elementwise kernel indexes in int64 from this many elements in one of its tensors
WIDE_FROM = 2**31
# an elementwise kernel's program: BLOCK consecutive elements, in ELEMENTWISE_WARPS warps
ELEMENTWISE_BLOCK = 1024
ELEMENTWISE_WARPS = 4


def launch(kernel, grid: tuple, *args, **kwargs) -> None:
    """``kernel[grid](*args, **kwargs)``; while a launcher is traced for Inductor
    (``op_sdk.triton_kernels.tracing``), the launch is recorded in the graph instead
    (``torch.library.wrap_triton``), and Inductor's generated code launches the kernel."""
    if tracing():
        kernel = torch.library.wrap_triton(kernel)
    kernel[grid](*args, **kwargs)


def elementwise(kernel, total: int, *args, **constexprs) -> None:
    """Launch an elementwise kernel (``BLOCK`` and ``WIDE`` constexprs, its indices from
    ``offsets``) over ``total`` elements; nothing when there are none."""
    if total:
        wide = total >= WIDE_FROM or any(isinstance(a, torch.Tensor) and a.numel() >= WIDE_FROM
                                         for a in args)
        launch(kernel, (triton.cdiv(total, ELEMENTWISE_BLOCK),), *args, **constexprs,
               BLOCK=ELEMENTWISE_BLOCK, WIDE=wide, num_warps=ELEMENTWISE_WARPS)


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
