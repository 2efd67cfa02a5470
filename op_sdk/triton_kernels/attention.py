"""npu_fused_infer_attention_score's CUDA kernel: flash attention over one (batch, query
head, block of query rows) per program, the keys in blocks with an online softmax, every
form the operator computes (op_sdk/ops/fused_infer_attention_score.py): the B and T
layouts (batch strides, or each batch's start row in a packed T dim), GQA, per-batch
sequence lengths, paged caches (a key row's block read from the block table), MLA's rope
parts, the additive pse_shift, the user mask of sparse modes 0 / 1 and the band of the
others (computed from the row and column, the blocks outside it skipped), the v2's sink
logit, and softmax_lse. The output is written in its final layout through its strides.

Arithmetic: scores and the softmax in float32; the probabilities rounded to value's dtype
for the product with value (float32 accumulation, ``tl.dot``), as the NPU's kernels do;
unlike the reference, which normalises the probabilities before that rounding, the kernel
rounds them before the division by the row's sum (flash attention's order, the NPU's too),
so outputs agree with the reference within the dtype's tolerance, not bit for bit. A row
with no visible key is 0 with lse +inf (the rows past a batch's length are left as the
launcher allocated them: 0 and +inf).

Portable subset (docs/triton.md) plus ``tl.dot``, as the int8 GEMM's kernel.
"""

from __future__ import annotations

import os

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import launch

# rows of a query block and of a key block; a head dim above MAX_D runs the reference
BLOCK_M = 32
BLOCK_N = 32
MAX_D = 512
# the band's bounds are held in int32: pre_tokens / next_tokens beyond every sequence are
# clamped to this (the same band)
_BIG = 1 << 28


def covers(d: int, dv: int, dr: int) -> bool:
    return max(d, dv, dr) <= MAX_D


@triton.jit
def _dot(a, b, F32_DOT: tl.constexpr):
    """a @ b accumulated in float32. Triton's interpreter has no bfloat16 arithmetic (it
    holds bfloat16 as raw bits): there the half-precision operands are widened first, which
    gives the same products (a product of two 8- or 11-bit significands is exact in
    float32); compiled, the tensor cores take them as they are."""
    if F32_DOT:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    return tl.dot(a, b)


@triton.jit
def _attention(q_ptr, k_ptr, v_ptr, qr_ptr, kr_ptr, out_ptr, lse_ptr, mask_ptr, pse_ptr,
               sink_ptr, table_ptr, q_start_ptr, q_len_ptr, k_start_ptr, k_len_ptr,
               n1, group, scale, band_lo, band_hi, block_size,
               sqb, sqs, sqn, sqd, skb, sks, skn, skd, svb, svs, svn, svd,
               srb, srs, srn, srd, skrb, skrs, skrn, skrd,
               sob, sos, son, sod, slb, sls, sln,
               smb, sms, smk, spb, spn, sps, spk, stb, stc,
               D, DV, DR,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
               BLOCK_DV: tl.constexpr, BLOCK_DR: tl.constexpr, ROPE: tl.constexpr,
               MASK: tl.constexpr, BAND: tl.constexpr, SHIFT: tl.constexpr,
               PSE: tl.constexpr, SINK: tl.constexpr, PAGED: tl.constexpr,
               F32_DOT: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // n1
    h = pid_bh - b * n1
    kh = h // group
    q_len = tl.load(q_len_ptr + b)
    k_len = tl.load(k_len_ptr + b)
    q_start = tl.load(q_start_ptr + b)
    k_start = tl.load(k_start_ptr + b)
    m0 = pid_m * BLOCK_M
    if m0 < q_len:
        rows = m0 + tl.arange(0, BLOCK_M)
        row_ok = rows < q_len
        d = tl.arange(0, BLOCK_D)
        dv = tl.arange(0, BLOCK_DV)
        q = tl.load(q_ptr + b * sqb + (q_start + rows)[:, None] * sqs + h * sqn
                    + d[None, :] * sqd, mask=row_ok[:, None] & (d < D)[None, :], other=0.0)
        if ROPE:
            dr = tl.arange(0, BLOCK_DR)
            qr = tl.load(qr_ptr + b * srb + (q_start + rows)[:, None] * srs + h * srn
                         + dr[None, :] * srd, mask=row_ok[:, None] & (dr < DR)[None, :],
                         other=0.0)
        # the band lo <= j - i (- shift) <= hi: the key blocks it reaches
        shift = 0
        if SHIFT:
            shift = k_len - q_len
        lo = band_lo + shift
        hi = band_hi + shift
        n_begin = 0
        n_end = k_len
        if BAND:
            n_begin = tl.maximum(m0 + lo, 0)
            n_begin = (n_begin // BLOCK_N) * BLOCK_N
            n_end = tl.minimum(k_len, m0 + BLOCK_M - 1 + hi + 1)
        m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_M], tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
        for n0 in range(n_begin, n_end, BLOCK_N):
            cols = n0 + tl.arange(0, BLOCK_N)
            col_ok = cols < n_end
            if PAGED:
                blk = tl.load(table_ptr + b * stb + (cols // block_size) * stc, mask=col_ok,
                              other=0)
                base_b = blk
                krow = cols - (cols // block_size) * block_size
            else:
                base_b = b
                krow = k_start + cols
            k = tl.load(k_ptr + base_b[:, None] * skb + krow[:, None] * sks + kh * skn
                        + d[None, :] * skd, mask=col_ok[:, None] & (d < D)[None, :], other=0.0)
            s = _dot(q, tl.trans(k), F32_DOT)
            if ROPE:
                kr = tl.load(kr_ptr + base_b[:, None] * skrb + krow[:, None] * skrs
                             + kh * skrn + dr[None, :] * skrd,
                             mask=col_ok[:, None] & (dr < DR)[None, :], other=0.0)
                s += _dot(qr, tl.trans(kr), F32_DOT)
            s = s * scale
            ok = row_ok[:, None] & col_ok[None, :]
            if PSE:
                s += tl.load(pse_ptr + b * spb + h * spn + rows[:, None] * sps
                             + cols[None, :] * spk, mask=ok, other=0.0).to(tl.float32)
            if MASK:
                hidden = tl.load(mask_ptr + b * smb + rows[:, None] * sms + cols[None, :] * smk,
                                 mask=ok, other=1)
                ok = ok & (hidden == 0)
            if BAND:
                rel = cols[None, :] - rows[:, None]
                ok = ok & (rel >= lo) & (rel <= hi)
            s = tl.where(ok, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(m_i - m_safe)
            p = tl.exp(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_ptr + base_b[:, None] * svb + krow[:, None] * svs + kh * svn
                        + dv[None, :] * svd, mask=col_ok[:, None] & (dv < DV)[None, :],
                        other=0.0)
            acc = acc * alpha[:, None] + _dot(p.to(v.dtype), v, F32_DOT)
            m_i = m_new
        if SINK:  # one more logit per head, of no value
            sink = tl.load(sink_ptr + h).to(tl.float32)
            m_new = tl.maximum(m_i, sink)
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.exp(sink - m_new)
            acc = acc * alpha[:, None]
            m_i = m_new
        seen = l_i != 0.0  # (a NaN row stays NaN)
        l_safe = tl.where(seen, l_i, 1.0)
        out = tl.where(seen[:, None], acc / l_safe[:, None], 0.0)
        tl.store(out_ptr + b * sob + (q_start + rows)[:, None] * sos + h * son
                 + dv[None, :] * sod, out.to(out_ptr.dtype.element_ty),
                 mask=row_ok[:, None] & (dv < DV)[None, :])
        lse = tl.where(seen, m_i + tl.log(l_safe), float("inf"))
        tl.store(lse_ptr + b * slb + (q_start + rows) * sls + h * sln, lse, mask=row_ok)


def run(q4, k4, v4, qr4, kr4, out4, lse3, mask3, pse4, sink, table, q_start, q_len, k_start,
        k_len, *, n1, group, scale, band, shift, block_size, max_q):
    """Launch over views in (B, S, N, D) order (``*4``: 4-D views whose batch stride is 0 in
    the T layouts; paged caches (blocks, block_size, N, D)), lse as a (B, S, N) view, the
    mask as (B, Sq, Skv) and pse as (B, N, Sq, Skv) (stride-0 dims where they broadcast);
    ``band``: None or (lo, hi) of j - i (plus Skv - Sq per batch with ``shift``)."""
    b = q_len.numel()
    d, dv = q4.shape[3], v4.shape[3]
    dr = qr4.shape[3] if qr4 is not None else 0
    if b == 0 or max_q == 0:
        return
    lo, hi = band if band is not None else (0, 0)
    lo, hi = max(-_BIG, min(lo, _BIG)), max(-_BIG, min(hi, _BIG))
    dummy = q_len
    grid = (triton.cdiv(max_q, BLOCK_M), b * n1)
    rope = qr4 if qr4 is not None else q4
    krope = kr4 if kr4 is not None else k4
    maskt = mask3 if mask3 is not None else dummy
    pset = pse4 if pse4 is not None else dummy
    m_str = (mask3.stride(0), mask3.stride(1), mask3.stride(2)) if mask3 is not None else (0,) * 3
    p_str = tuple(pse4.stride()) if pse4 is not None else (0,) * 4
    t_str = (table.stride(0), table.stride(1)) if table is not None else (0, 0)
    launch(_attention, grid, q4, k4, v4, rope, krope, out4, lse3, maskt, pset,
           sink if sink is not None else dummy, table if table is not None else dummy,
           q_start, q_len, k_start, k_len, n1, group, float(scale), lo, hi, block_size,
           *q4.stride(), *k4.stride(), *v4.stride(), *rope.stride(), *krope.stride(),
           *out4.stride(), *lse3.stride(), *m_str, *p_str, *t_str, d, dv, dr,
           BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_D=max(16, triton.next_power_of_2(d)),
           BLOCK_DV=max(16, triton.next_power_of_2(dv)),
           BLOCK_DR=max(16, triton.next_power_of_2(max(dr, 1))), ROPE=qr4 is not None,
           MASK=mask3 is not None, BAND=band is not None, SHIFT=shift, PSE=pse4 is not None,
           SINK=sink is not None, PAGED=table is not None,
           F32_DOT=os.environ.get("TRITON_INTERPRET") == "1", num_warps=4)


__all__ = ["run", "covers"]
