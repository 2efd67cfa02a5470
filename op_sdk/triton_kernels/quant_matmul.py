"""The Triton kernel of npu_quant_matmul's int8 form (ops/quant_matmul.py's contract): an
int8 x int8 GEMM with int32 accumulation and the dequantising epilogue in the same kernel;
and of its A4W4 form (int4 x1 and weight, 8 values an int32, element 0 in the low nibble),
whose tiles are unpacked to int8 in registers as they are loaded (``_unpack_last`` /
``_unpack_first``), so the packed operands are read once and never widened in memory.

``out = (x1 @ x2 (+ int32 bias)) * scale (* pertoken_scale[m]) (+ float bias)``, each
product rounded on its own in fp32 (``_common.mul``), then the output dtype's rounding, or
the int8 requantisation (s9 round half to even, + the s9 offset, saturated). The int32
product is exact (``tl.dot`` of int8 tiles into int32), so the result is the reference's
bit for bit whatever the tile sizes and the order of the k loop.

One kernel, ``_qmm``: the product tile by tile and the epilogue in registers, with no
int32 matrix in memory. Measured on an H200 (benchmarks/sweep_quant_matmul.py), it is
faster than torch._int_mm (cuBLAS) followed by an epilogue, or than the int32 product
alone, from decode to 4096-row prefill, and it takes decode shapes (16 rows or fewer)
that torch._int_mm refuses (docs/triton.md).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from op_sdk.triton_kernels import _common
from op_sdk.triton_kernels._common import WIDE_FROM, launch, mul, round_saturate

# epilogue kinds (constexpr OUT): a float output, int32, or int8 (requantised)
FLOAT_OUT, INT32_OUT, INT8_OUT = 0, 1, 2
# bias kinds (constexpr BIAS): none, int32 (added to the product), float (added after the
# scales); BIAS_BATCH: one bias row per batch of `rows_per_batch` rows (a (batch, 1, n) bias)
NO_BIAS, INT_BIAS, FLOAT_BIAS = 0, 1, 2


@triton.jit
def _dequant(acc, r, c, m, s_ptr, p_ptr, b_ptr, o_ptr, rows, n, rows_per_batch,
             S_PER: tl.constexpr, HAS_P: tl.constexpr, BIAS: tl.constexpr,
             BIAS_BATCH: tl.constexpr, O_PER: tl.constexpr, OUT: tl.constexpr):
    """The epilogue of an int32 product tile ``acc`` at rows ``r`` / columns ``c`` (mask
    ``m``) of a (rows, n) output whose batches hold ``rows_per_batch`` rows each: the
    value to store (an int32, or an fp32 for the output's cast: int8's is integral and in
    range). The per-token scale is the row's within its batch, the (batch, 1, n)
    bias the batch's."""
    cm = c < n
    if BIAS != 0:
        if BIAS_BATCH:
            b_at = (r // rows_per_batch)[:, None] * n + c[None, :]
            bias = tl.load(b_ptr + b_at, mask=m, other=0)
        else:
            bias = tl.load(b_ptr + c, mask=cm, other=0)[None, :]
    if BIAS == 1:
        acc = acc + bias  # int32, wrapping as the reference's int32 add
    if OUT == 1:
        y = acc
    else:
        s = tl.load(s_ptr + (c if S_PER else c * 0), mask=cm, other=1.0)[None, :]
        v = mul(acc.to(tl.float32), s, m)
        if HAS_P:
            p = tl.load(p_ptr + r % rows_per_batch, mask=r < rows, other=1.0)
            v = mul(v, p[:, None], m)
        if BIAS == 2:
            v = v + bias.to(tl.float32)
        if OUT == 2:
            # quantize_s9 (a NaN to the low bound), + the offset, saturated to int8
            t = tl.where(v != v, -256.0, round_saturate(v, -256.0, 255.0))
            if O_PER != 0:
                t = t + tl.load(o_ptr + (c if O_PER == 2 else c * 0), mask=cm, other=0.0)[None, :]
            y = tl.minimum(tl.maximum(t, -128.0), 127.0)
        else:
            y = v
    return y


@triton.jit
def _signed_nibbles(words, shifts):
    """int32 words shifted by ``shifts`` (broadcasting): each low nibble as a signed int4."""
    nib = (words >> shifts) & 15
    return nib - ((nib & 8) << 1)


@triton.jit
def _unpack_last(words, R: tl.constexpr, C: tl.constexpr):
    """An (R, C / 8) tile of int32 words packed along its columns -> the (R, C) int8 tile
    (word j's nibble i is column 8 j + i)."""
    nib = _signed_nibbles(words[:, :, None], (tl.arange(0, 8) * 4)[None, None, :])
    return tl.reshape(nib, (R, C)).to(tl.int8)


@triton.jit
def _unpack_first(words, R: tl.constexpr, C: tl.constexpr):
    """An (R / 8, C) tile of int32 words packed along its rows -> the (R, C) int8 tile
    (word j's nibble i is row 8 j + i)."""
    nib = _signed_nibbles(words[:, None, :], (tl.arange(0, 8) * 4)[None, :, None])
    return tl.reshape(nib, (R, C)).to(tl.int8)


@triton.jit
def _product(a, b, mask):
    """a * b rounded on its own before the add of a running sum consumes it, as
    ``_common.mul``; its masked-off lanes hold a + 1, not a: in a loop, LLVM rewrites
    ``select(mask, a * b, a)`` as ``a * select(mask, b, 1)`` and contracts that product and
    the sum's add into one fma (and a + b would add a product where b is one). ``a`` is
    never a product here (tests/triton/test_compile_sm90.py checks the PTX)."""
    return tl.where(mask, a * b, a + 1.0)


@triton.jit
def _tiles(a_at, w_at, r, c, c8, kk, k8, k0, M, N, K, sak, swk, BLOCK_M: tl.constexpr,
           BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PACK_A: tl.constexpr,
           PACK_W: tl.constexpr):
    """The int8 (or float8) x1 and weight tiles of the k block at k0 (int4 words unpacked),
    and the pointers moved to the next block (masked-off elements 0; written 0.0, which
    Triton's interpreter can cast to a float8 tile too)."""
    rm = r < M
    cm = c < N
    km = kk < K - k0
    k8m = k8 < (K - k0) // 8
    if PACK_A:
        a = _unpack_last(tl.load(a_at, mask=rm[:, None] & k8m[None, :], other=0.0),
                         BLOCK_M, BLOCK_K)
        a_at += (BLOCK_K // 8) * sak
    else:
        a = tl.load(a_at, mask=rm[:, None] & km[None, :], other=0.0)
        a_at += BLOCK_K * sak
    if PACK_W == 1:
        w = _unpack_last(tl.load(w_at, mask=km[:, None] & (c8 < N // 8)[None, :], other=0.0),
                         BLOCK_K, BLOCK_N)
        w_at += BLOCK_K * swk
    elif PACK_W == 2:
        w = _unpack_first(tl.load(w_at, mask=k8m[:, None] & cm[None, :], other=0.0),
                          BLOCK_K, BLOCK_N)
        w_at += (BLOCK_K // 8) * swk
    else:
        w = tl.load(w_at, mask=km[:, None] & cm[None, :], other=0.0)
        w_at += BLOCK_K * swk
    return a, w, a_at, w_at


@triton.jit
def _qmm(a_ptr, w_ptr, s_ptr, p_ptr, b_ptr, o_ptr, y_ptr, M, N, K, rows_per_batch,
         sab, sam, sak, swb, swk, swn,
         S_PER: tl.constexpr, HAS_P: tl.constexpr, BIAS: tl.constexpr,
         BIAS_BATCH: tl.constexpr, O_PER: tl.constexpr, OUT: tl.constexpr,
         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
         GROUP_M: tl.constexpr, WIDE: tl.constexpr, PACK_A: tl.constexpr = False,
         PACK_W: tl.constexpr = 0, GROUP: tl.constexpr = 0, ZERO_W: tl.constexpr = False,
         BLOCK_SCALE: tl.constexpr = False, FLOAT_IN: tl.constexpr = False,
         ROW_GROUP: tl.constexpr = 1):
    # PACK_A: x1's words hold 8 int4 values along k (sak steps a word); PACK_W: the weight's
    # 1 along n (swn steps a word), 2 along k (swk steps a word); K and N count values.
    # GROUP: a (cdiv(K, GROUP), N) fp32 scale, one row per GROUP rows of k; A8W4 (x1 - 8
    # against the weight), or with ZERO_W per-group A4W4 (the weight's float16 zero points
    # at o_ptr, shaped like the scale); with BLOCK_SCALE the G-B form (int8 x1 and weight,
    # p_ptr the (M, cdiv(K, GROUP)) per-token-group scale, s_ptr the (cdiv(K, GROUP),
    # cdiv(N, GROUP)) per-block one, a float (n,) bias after the sum); FLOAT_IN: float8 x1
    # and weight (each block's product accumulated in fp32 by tl.dot), ROW_GROUP: x1's rows
    # a scale covers (1 G-B, GROUP B-B)
    bt = tl.program_id(1)
    if WIDE:
        bt = tl.cast(bt, tl.int64)
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pm = first_m + (pid % per_group) % size_m
    pn = (pid % per_group) // size_m
    r = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    c = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    kk = tl.arange(0, BLOCK_K)
    k8 = tl.arange(0, BLOCK_K // 8)  # (a tile's words along k)
    c8 = pn * (BLOCK_N // 8) + tl.arange(0, BLOCK_N // 8)  # (along n)
    if WIDE:
        r = tl.cast(r, tl.int64)
        c = tl.cast(c, tl.int64)
        c8 = tl.cast(c8, tl.int64)
    rm = r < M
    cm = c < N
    if PACK_A:
        a_at = a_ptr + bt * sab + r[:, None] * sam + k8[None, :] * sak
    else:
        a_at = a_ptr + bt * sab + r[:, None] * sam + kk[None, :] * sak
    if PACK_W == 1:
        w_at = w_ptr + bt * swb + kk[:, None] * swk + c8[None, :] * swn
    elif PACK_W == 2:
        w_at = w_ptr + bt * swb + k8[:, None] * swk + c[None, :] * swn
    else:
        w_at = w_ptr + bt * swb + kk[:, None] * swk + c[None, :] * swn
    m = rm[:, None] & cm[None, :]
    rows = bt * M + r  # the rows of the whole output
    if GROUP == 0:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
        for k0 in range(0, K, BLOCK_K):
            a, w, a_at, w_at = _tiles(a_at, w_at, r, c, c8, kk, k8, k0, M, N, K, sak, swk,
                                      BLOCK_M, BLOCK_N, BLOCK_K, PACK_A, PACK_W)
            acc = tl.dot(a, w, acc, out_dtype=tl.int32)
        y = _dequant(acc, rows, c, m, s_ptr, p_ptr, b_ptr, o_ptr, M * tl.num_programs(1), N,
                     rows_per_batch, S_PER, HAS_P, BIAS, BIAS_BATCH, O_PER, OUT)
    else:
        # per group of k, in order: the group's value, times its scale row, summed in fp32.
        # A8W4: the exact int32 product of x1 - 8 and the weight (x1 @ w - 8 * w's column
        # sums); per-group A4W4: x1 @ (w - zero) = x1 @ w - x1's row sums * zero, the
        # product exact in fp32 (at most 11 + 11 significant bits) and the difference rounded
        # once, as the reference's exact fp64 value rounded to fp32
        v = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for g0 in range(0, K, GROUP):
            if FLOAT_IN:
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            else:
                acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.int32)
            sums = tl.zeros((BLOCK_N,), dtype=tl.int32)
            row_sums = tl.zeros((BLOCK_M,), dtype=tl.int32)
            for k0 in range(g0, g0 + GROUP, BLOCK_K):
                a, w, a_at, w_at = _tiles(a_at, w_at, r, c, c8, kk, k8, k0, M, N, K, sak, swk,
                                          BLOCK_M, BLOCK_N, BLOCK_K, PACK_A, PACK_W)
                if FLOAT_IN:
                    acc = tl.dot(a, w, acc, out_dtype=tl.float32)
                else:
                    acc = tl.dot(a, w, acc, out_dtype=tl.int32)
                if ZERO_W:
                    row_sums += tl.sum(a.to(tl.int32), axis=1)
                elif not BLOCK_SCALE:
                    sums += tl.sum(w.to(tl.int32), axis=0)
            g = g0 // GROUP
            at = g * N + c
            if BLOCK_SCALE:  # (the two scales' product, then the term: each rounded)
                xs = tl.load(p_ptr + (r // ROW_GROUP) * tl.cdiv(K, GROUP) + g, mask=rm,
                             other=0.0)
                ws = tl.load(s_ptr + g * tl.cdiv(N, GROUP) + c // GROUP, mask=cm, other=0.0)
                v = v + _product(acc.to(tl.float32), xs[:, None] * ws[None, :], m)
            elif ZERO_W:
                z = tl.load(o_ptr + at, mask=cm, other=0.0).to(tl.float32)
                val = acc.to(tl.float32) - _product(row_sums.to(tl.float32)[:, None],
                                                    z[None, :], m)
            else:
                val = (acc - 8 * sums[None, :]).to(tl.float32)
            if not BLOCK_SCALE:
                s = tl.load(s_ptr + at, mask=cm, other=0.0)
                v = v + _product(val, s[None, :], m)
        if BLOCK_SCALE:
            if BIAS == 2:
                v = v + tl.load(b_ptr + c, mask=cm, other=0.0)[None, :]
            y = v
        else:
            if O_PER != 0:  # (A8W4's y offset, per column)
                v = v + tl.load(o_ptr + c, mask=cm, other=0.0)[None, :]
            p = tl.load(p_ptr + r, mask=rm, other=1.0)
            y = mul(v, p[:, None], m)
    tl.store(y_ptr + rows[:, None] * N + c[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages); BLOCK_K >= 32: the least an int8 tl.dot takes
_DECODE = (16, 64, 256, 4, 4)
_WIDE_TO_NARROW = ((128, 128, 128, 8, 3), (64, 128, 128, 4, 4), (64, 64, 128, 4, 4))


def tiles(m, k: int, n: int, device: torch.device) -> dict:
    """The GEMM's tiles for an (m, k) x (k, n) product, from the sweeps of
    benchmarks/sweep_quant_matmul.py on an H200 (sweep_quant_matmul_h200*.json): up to 16
    rows, and up to 64 rows with k >= 4096, 16-row tiles 256 deep (decode: more programs
    across the columns); up to 64 rows with a shallower k, 64 x 64 tiles (the 16-row
    tiles' programs are too short there: 13.0 against 7.3 us at 64 x 2048 x 7168); more
    rows, the widest tiles that still give every SM a program. A symbolic m
    (torch.compile's dynamic shapes) is read through its hint, without a guard: every
    tiling computes the same bits."""
    if isinstance(m, torch.SymInt):
        m = m.node.hint if m.node.hint is not None else 1 << 20
    if m <= 16 or (m <= 64 and k >= 4096):
        cfg = _DECODE
    elif m <= 64:
        cfg = _WIDE_TO_NARROW[-1]
    else:
        sms = _common.sm_count(device)
        cfg = next((c for c in _WIDE_TO_NARROW
                    if triton.cdiv(m, c[0]) * triton.cdiv(n, c[1]) >= sms), _WIDE_TO_NARROW[-1])
    return dict(zip(("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages"), cfg))


# the grouped forms' rows of k per scale row (ops/_quant_matmul_int4.py's A8W4_GROUP and
# A4W4_GROUP), and the G-B form's block (ops/_quant_matmul_per_block.py's [1, 128, 128])
GROUP_K = 256
BLOCK_K_GB = 128


def _run_groups(x1, x2, s, pertoken, out, k, group, config, b=None, o=None, **flags):
    """_qmm's grouped mode (``group`` rows of k a scale row) over the (m, k) x (k, n)
    product into ``out``: the tiles (k blocks within one group), the grid and the launch
    the grouped forms share; ``b`` / ``o`` the bias / offset pointers (absent: any valid
    one, never read), ``flags`` the form's switches."""
    m, n = x1.shape[0], out.shape[-1]
    if m * n == 0:
        return out
    cfg = dict(config or tiles(m, k, n, x1.device))
    cfg["BLOCK_K"] = min(cfg["BLOCK_K"], group)  # (a block within one group)
    grid = (triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"]), 1)
    launch(_qmm, grid, x1, x2, s, pertoken, s if b is None else b, s if o is None else o, out,
           m, n, k, m, 0, *x1.stride(), 0, *x2.stride(), S_PER=True, HAS_P=True,
           BIAS_BATCH=False, OUT=FLOAT_OUT, **cfg, GROUP_M=8, GROUP=group,
           WIDE=max(m * k, k * n, out.numel()) >= WIDE_FROM, **flags)
    return out


def run_block_scaled(x1, x2, pertoken, s, bias, out, row_group=1, config=None):
    """The G-B / B-B forms into ``out`` (its fake's allocation): int8 or float8 x1 (m, k) and
    weight (k, n), ``pertoken`` the fp32 (cdiv(m, row_group), cdiv(k, 128)) scale of each
    group of ``row_group`` rows (1: G-B, 128: B-B) and 128 of k, ``s`` the fp32
    (cdiv(k, 128), cdiv(n, 128)) scale of each 128 x 128 block of the weight, ``bias`` fp32
    (n,) or None (int8 only):
    ``out = sum_j fp32(x1[:, Kj] @ x2[Kj]) * (pertoken[m / row_group, j] * s[j, n / 128])
    (+ bias)``, the blocks summed in fp32 in order (int8's block products exact; float8's
    accumulated in fp32 by the tensor cores). Returns ``out``."""
    return _run_groups(x1, x2, s, pertoken, out, x1.shape[1], BLOCK_K_GB, config, b=bias,
                       BIAS=NO_BIAS if bias is None else FLOAT_BIAS, O_PER=0,
                       BLOCK_SCALE=True, FLOAT_IN=x1.is_floating_point(), ROW_GROUP=row_group)


def run_grouped(x1, x2, s, pertoken, out, *, offset=None, zero=None, pack_w=1, config=None):
    """A grouped form into ``out`` (its fake's allocation), ``s`` the fp32 (cdiv(k, 256), n)
    scale, ``pertoken`` (m, 1) fp32. A8W4: int8 x1 (m, k), the int4 weight (k, n / 8) packed
    along n, ``offset`` the (n,) fp32 y offset or None:
    ``out = (sum_g s[g] * ((x1[:, g] - 8) @ w[g]) (+ offset)) * pertoken``. Per-group A4W4:
    int32 x1 (m, k / 8), the weight in either A4W4 layout (``pack_w`` as ``run``'s), ``zero``
    the (cdiv(k, 256), n) float16 zero points:
    ``out = (sum_g s[g] * (x1[:, g] @ (w[g] - zero[g]))) * pertoken``. The groups are summed
    in fp32 in order. Returns ``out``."""
    pack_a = x1.dtype == torch.int32
    return _run_groups(x1, x2, s, pertoken, out, x1.shape[1] * (8 if pack_a else 1), GROUP_K,
                       config, o=zero if zero is not None else offset, BIAS=NO_BIAS,
                       O_PER=0 if offset is None else 2, PACK_A=pack_a, PACK_W=pack_w,
                       ZERO_W=zero is not None)


def run(x1, x2, s, pertoken, bias, offset, out, kind, config=None, pack_w=0):
    """The int8 form into ``out`` (its fake's allocation): ``x1`` (..., m, k) and ``x2``
    (k, n), or a batched ``x2`` (..., k, n) whose batch dims broadcast with x1's, int8;
    ``s`` the fp32 scale ((1,) or (n,)), ``offset`` the s9 offset or None, ``kind``
    FLOAT_OUT / INT32_OUT / INT8_OUT; ``config`` (tile sizes, warps, stages) replaces
    ``tiles``' choice. A 2-D weight makes one GEMM of all x1's rows; a batched one, a GEMM
    per batch (a grid axis). The A4W4 form: int32 x1 (..., m, k / 8) packed along k and a
    2-D int32 weight, ``pack_w`` 1 for (k, n / 8) packed along n, 2 for the (k / 8, n)
    view packed along k. Returns ``out``."""
    pack_a = x1.dtype == torch.int32
    k, n = x1.shape[-1] * (8 if pack_a else 1), out.shape[-1]
    if x2.dim() == 2:
        a = x1.flatten(0, -2)
        rows_per_batch, batches, m = x1.shape[-2], 1, a.shape[0]
        (sam, sak), sab = a.stride(), 0
        w, (swk, swn), swb = x2, x2.stride(), 0
    else:
        batch, m = out.shape[:-2], x1.shape[-2]
        batches = batch.numel()
        a = x1.expand(*batch, m, k).reshape(batches, m, k)
        w = x2.expand(*batch, k, n).reshape(batches, k, n)
        rows_per_batch = m
        sab, sam, sak = a.stride()
        swb, swk, swn = w.stride()
    if batches * m * n == 0:
        return out
    bias_kind = NO_BIAS if bias is None else INT_BIAS if bias.dtype == torch.int32 else FLOAT_BIAS
    flags = dict(S_PER=s.numel() > 1, HAS_P=pertoken is not None, BIAS=bias_kind,
                 BIAS_BATCH=bias is not None and bias.dim() == 3,
                 O_PER=0 if offset is None else 1 + (offset.numel() > 1), OUT=kind)
    # absent tensors: any valid pointer (the kernel reads none of them)
    p, b, o = (s if t is None else t for t in (pertoken, bias, offset))
    cfg = dict(config or tiles(m, k, n, x1.device))
    grid = (triton.cdiv(m, cfg["BLOCK_M"]) * triton.cdiv(n, cfg["BLOCK_N"]), batches)
    launch(_qmm, grid, a, w, s, p, b, o, out.view(batches * m, n), m, n, k, rows_per_batch,
           sab, sam, sak, swb, swk, swn, **flags, **cfg, GROUP_M=8, PACK_A=pack_a,
           PACK_W=pack_w,
           WIDE=max(a.numel(), w.numel(), out.numel(),
                    batches * max(abs(sab), abs(swb), 1)) >= WIDE_FROM)
    return out
