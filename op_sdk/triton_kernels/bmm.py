"""npu_transpose_batchmatmul's epilogue on CUDA (ops/transpose_batchmatmul.py's contract):
the product itself is torch's batched GEMM (cuBLAS), written straight into the operator's
(M, B, N) output where no scale is given; with ``scale`` the float32 product (B, M, N) goes
through ``_requant``: ``acc * scale[b * N + n]`` rounded half to even and saturated to int8
(``_common.store_int8``), stored at (m, 0, b * N + n) of the (M, 1, B * N) output, one pass
over the product instead of the reference's chain (multiply, round, clamp, cast, permute,
copy).
"""

from __future__ import annotations

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import Outputs, store_int8, tile, tiled


@triton.jit
def _requant(acc_ptr, s_ptr, q_ptr, rows, m, n, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
             WIDE: tl.constexpr):
    """Row r = b * M + i of the (B * M, N) product: q[i, b * N + c] = int8(acc[r, c] *
    scale[b * N + c])."""
    r, c, mask = tile(rows, n, BLOCK_R, BLOCK_C, WIDE)
    b = r // m
    i = r - b * m
    v = tl.load(acc_ptr + r[:, None] * n + c[None, :], mask=mask, other=0.0)
    s = tl.load(s_ptr + (b * n)[:, None] + c[None, :], mask=mask, other=0.0)
    batches = rows // m
    tl.store(q_ptr + (i * (batches * n) + b * n)[:, None] + c[None, :], store_int8(v * s),
             mask=mask)


def run_requant(acc, scale, out):
    """acc (B, M, N) float32 and scale (B * N,) float32 into ``out`` (M, 1, B * N) int8 (its
    fake's allocation); returns it."""
    o = Outputs(out)
    b, m, n = acc.shape
    if b * m * n:
        tiled(_requant, b * m, n, acc.contiguous(), scale.contiguous(), o.bufs[0], b * m, m, n)
    return o.done()[0]
