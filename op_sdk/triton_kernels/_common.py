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
def rint(v):
    """v rounded to an integer, half to even (an fp32 |v| < 2^22): adding and subtracting
    1.5 * 2^23."""
    return (v + _RNE) - _RNE


@triton.jit
def round_saturate(v, lo, hi):
    """The contract's float -> integer store (ops/_common.py quantize_round) for a range
    inside +-2^22 (int8, uint8, int4): round half to even, saturate to [lo, hi] (+-inf to
    the bounds), NaN 0; an fp32 holding an integer, for a cast to the store's type."""
    nan = v != v
    c = tl.minimum(tl.maximum(v, lo), hi)
    return tl.where(nan, 0.0, rint(c))


@triton.jit
def store_int8(v):
    return round_saturate(v, -128.0, 127.0).to(tl.int8)


@triton.jit
def abs_bits(v, mask):
    """|v| (0 off the mask) as int32 bits, which order as the amax orders them: the bits of a
    non-negative float order as int32s do, and every NaN's bits (sign cleared) lie above
    inf's, so the largest bits are a NaN where there is one (ops/_common.py absmax: NaN
    propagates)."""
    return tl.where(mask, tl.abs(v), 0.0).to(tl.int32, bitcast=True)


@triton.jit
def absmax(v, mask):
    """max |v| over the masked row, NaN propagating, in one reduction of ``abs_bits``."""
    return tl.max(abs_bits(v, mask), axis=0).to(tl.float32, bitcast=True)


@functools.lru_cache(maxsize=None)
def sm_count(device: torch.device) -> int:
    """The device's streaming multiprocessors (the interpreter: an H100's 132)."""
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132


def _programs_cap(device: torch.device) -> int:
    if device.type == "cuda":
        return sm_count(device) * 16
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
    return {"grid": (programs,), "num_warps": row_warps(block, elem_bytes, quant),
            "programs": programs}


def row_warps(block: int, elem_bytes: int, quant: bool = False) -> int:
    """Warps of a program that holds rows of ``block`` elements (``row_launch``'s rule)."""
    return max(1, min(8 if quant else 4, block * elem_bytes // 2048))


def launch(kernel, grid: tuple, *args, **kwargs) -> None:
    """``kernel[grid](*args, **kwargs)``; while a launcher is traced for Inductor
    (``op_sdk.triton_kernels.tracing``), the launch is recorded in the graph instead
    (``torch.library.wrap_triton``), and Inductor's generated code launches the kernel."""
    if tracing():
        kernel = torch.library.wrap_triton(kernel)
    kernel[grid](*args, **kwargs)


# a tiled kernel indexes in int64 from this many elements in one of its tensors
WIDE_FROM = 2**31
# elements one program of a tiled kernel holds: BLOCK_R rows x BLOCK_C columns
TILE = 2048
TILE_WARPS = 4


@triton.jit
def tile(rows, cols, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, WIDE: tl.constexpr):
    """This program's tile of a (rows, cols) matrix: its row and column indices and their
    mask. Programs walk the column blocks of a row block first (one division per program,
    none per element); the row indices are int32 where every index the kernel forms fits
    (``WIDE`` False: its tensors hold fewer than 2^31 elements; a 32-bit multiply-add is a
    fraction of a 64-bit one on a GPU, and triton-ascend runs 64-bit indices as scalar
    code), else int64."""
    pid = tl.program_id(0)
    blocks = tl.cdiv(cols, BLOCK_C)
    pr = pid // blocks
    r = pr * BLOCK_R + tl.arange(0, BLOCK_R)
    c = (pid - pr * blocks) * BLOCK_C + tl.arange(0, BLOCK_C)
    if WIDE:
        r = tl.cast(r, tl.int64)
    return r, c, (r < rows)[:, None] & (c < cols)[None, :]


def tiled(kernel, rows, cols, *args, tile=None, **constexprs) -> None:
    """Launch a tiled kernel (``BLOCK_R``, ``BLOCK_C`` and ``WIDE`` constexprs, its indices
    from ``tile``) over a (rows, cols) matrix: rows of at most ``tile`` (default TILE)
    columns per program, as many rows as fill ``tile`` elements; nothing when the matrix
    is empty."""
    if rows * cols:
        tile = tile or TILE
        block_c = min(block_for(cols), tile)
        block_r = max(1, tile // block_c)
        wide = rows * cols >= WIDE_FROM or any(
            isinstance(a, torch.Tensor) and a.numel() >= WIDE_FROM for a in args)
        grid = (triton.cdiv(rows, block_r) * triton.cdiv(cols, block_c),)
        launch(kernel, grid, *args, **constexprs, BLOCK_R=block_r, BLOCK_C=block_c, WIDE=wide,
               num_warps=TILE_WARPS)


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
