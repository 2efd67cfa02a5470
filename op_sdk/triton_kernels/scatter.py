"""npu_scatter_nd_update on CUDA (ops/scatter_nd_update.py's contract): the input copied into
the output, then each update's slice (``inner`` elements) stored at its address, one program
per update. Which updates are written is the operator's own rule, computed on the device
(``ops.scatter_nd_update.last_updates``: of updates to one address only the last in index
order), so no two programs store to one element. The values are moved as their bits (a
uint8 / int16 / int32 / int64 view of the dtype's width), so every dtype of those widths
runs here."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from op_sdk.triton_kernels._common import launch

BLOCK = 1024
# the integer view a dtype's elements are moved through, by the element's width in bytes
VIEW = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_CHUNKS = 64  # programs along one update's slice (each loops over its share of the blocks)


@triton.jit
def _scatter_rows(out_ptr, upd_ptr, rows_ptr, inner, BLOCK: tl.constexpr, CHUNKS: tl.constexpr):
    # program (i, j): update i's slice, blocks j, j + CHUNKS, ... of it, into row rows[i]
    # (inner elements a row) of the output; rows[i] < 0: not written
    i = tl.program_id(0)
    row = tl.load(rows_ptr + i)
    if row >= 0:
        src = tl.cast(i, tl.int64) * inner
        dst = row * inner
        for c0 in range(tl.program_id(1) * BLOCK, inner, CHUNKS * BLOCK):
            offs = c0 + tl.arange(0, BLOCK)
            m = offs < inner
            tl.store(out_ptr + dst + offs, tl.load(upd_ptr + src + offs, mask=m), mask=m)


def covers(dtype: torch.dtype) -> bool:
    return dtype.itemsize in VIEW


def run(out, input, updates, rows, inner: int):
    """``input`` with each update's slice of ``inner`` elements (``updates`` in index order)
    at its row of ``rows`` (int64: the flat address among input's leading dims, -1: not
    written) into ``out`` (its fake's allocation); returns ``out``."""
    buf = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype,
                                                      device=out.device)
    buf.copy_(input)
    if rows.numel() and inner:
        view = VIEW[buf.element_size()]
        grid = (rows.numel(), min(_CHUNKS, triton.cdiv(inner, BLOCK)))
        launch(_scatter_rows, grid, buf.view(view), updates.contiguous().view(view),
               rows.contiguous(), inner, BLOCK=BLOCK, CHUNKS=_CHUNKS)
    if buf is not out:
        out.copy_(buf)
    return out
