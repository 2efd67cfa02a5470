"""The Triton kernel of npu_kv_rmsnorm_rope_cache and its v2 pair (ops/kv_rmsnorm_rope_cache.py's
contract): per token (a row of kv, D = Dv + Dk), in fp32 as the reference computes it,

* ``c_kv = (x / sqrt(sum(x^2) * fl(1 / Dv) + eps)) * gamma`` over x = kv[:Dv] (the sum of
  squares a tree sum: the reference's order differs, so c_kv agrees within rounding and an
  int8 cache value may differ by one step on a rounding boundary, as the norm kernels');
* ``k_rope``: npu_interleave_rope's pairs on kv[Dv:] (``rotary._rotate`` in the
  "interleave-half" mode: inputs 2j / 2j + 1, outputs j / j + Dk / 2, each product rounded);
* both rounded once to kv's dtype for the outputs, and written to their caches at the
  token's row ``dst`` (the launcher's ``written_rows``: -1 where nothing is written, one
  writer per row, so no two programs store to one place), of kv's dtype or int8
  (``round_half_even(v * scale)`` saturated, ``_common.store_int8``), in row-major rows or
  FRACTAL_NZ (row ``t`` of block ``t // bs``, column ``c``: element
  ``(t // bs) * W * bs + (c // C0) * bs * C0 + (t % bs) * C0 + c % C0``).

A program holds BLOCK_R whole tokens; the row count is a runtime argument.
"""

from __future__ import annotations

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import (
    MAX_ROW,
    Outputs,
    block_for,
    div,
    launch,
    mul,
    sqrt,
    store_int8,
)
from op_sdk.triton_kernels.rotary import _pairs, _rotate

# elements of c_kv one program holds (BLOCK_R rows of BLOCK_V)
TILE = 2048


@triton.jit
def _cache_offset(dst, col, W: tl.constexpr, NZ: tl.constexpr, C0: tl.constexpr, bs):
    """Element offset of (cache row ``dst``, column ``col``) in a cache of width W."""
    if NZ:
        return (dst // bs) * (W * bs) + (col // C0) * (bs * C0) + (dst % bs) * C0 + col % C0
    return dst * W + col


@triton.jit
def _kv_rmsnorm_rope_cache(kv_ptr, g_ptr, r1_ptr, r2_ptr, dst_ptr, ks_ptr, vs_ptr,
                           kr_ptr, ckv_ptr, kc_ptr, vc_ptr,
                           rows, s, ct0, ct2, ct3, inv_dv, eps, bs,
                           DV: tl.constexpr, DK: tl.constexpr, BLOCK_R: tl.constexpr,
                           BLOCK_V: tl.constexpr, BLOCK_P: tl.constexpr,
                           K_QUANT: tl.constexpr, V_QUANT: tl.constexpr, NZ: tl.constexpr,
                           K_C0: tl.constexpr, V_C0: tl.constexpr, WIDE: tl.constexpr):
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    if WIDE:
        r = tl.cast(r, tl.int64)
    live = r < rows
    dst = tl.load(dst_ptr + r, mask=live, other=-1)[:, None]
    write = live[:, None] & (dst >= 0)
    base = r[:, None] * (DV + DK)
    # c_kv: the norm of kv[:Dv]
    cv = tl.arange(0, BLOCK_V)
    mv = live[:, None] & (cv < DV)[None, :]
    x = tl.load(kv_ptr + base + cv[None, :], mask=mv, other=0.0).to(tl.float32)
    ss = tl.sum(mul(x, x, mv), axis=1)
    ms = mul(ss, inv_dv, live)  # (rounded on its own: no fma with the + eps)
    den = sqrt(ms + eps)[:, None]
    g = tl.load(g_ptr + cv, mask=cv < DV, other=0.0).to(tl.float32)[None, :]
    v32 = mul(div(x, den), g, mv)
    out_ty = ckv_ptr.dtype.element_ty
    tl.store(ckv_ptr + r[:, None] * DV + cv[None, :], v32.to(out_ty), mask=mv)
    vo = _cache_offset(dst, cv[None, :], DV, NZ, V_C0, bs)
    if V_QUANT:
        vs = tl.load(vs_ptr + cv, mask=cv < DV, other=0.0)[None, :]
        tl.store(vc_ptr + vo, store_int8(v32 * vs), mask=mv & write)
    else:
        tl.store(vc_ptr + vo, v32.to(out_ty), mask=mv & write)
    # k_rope: the interleave-half pairs of kv[Dv:]
    j = tl.arange(0, BLOCK_P)
    mk = live[:, None] & (j < DK // 2)[None, :]
    o1, o2, i1, i2 = _pairs(j, 3, DK)
    x1 = tl.load(kv_ptr + base + DV + i1[None, :], mask=mk, other=0.0).to(tl.float32)
    x2 = tl.load(kv_ptr + base + DV + i2[None, :], mask=mk, other=0.0).to(tl.float32)
    ro = ((r // s) * ct0 + (r % s) * ct2)[:, None]
    y1, y2 = _rotate(x1, x2, r1_ptr, r2_ptr, ro, o1, o2, ct3, mk)
    kb = r[:, None] * DK
    tl.store(kr_ptr + kb + o1[None, :], y1.to(out_ty), mask=mk)
    tl.store(kr_ptr + kb + o2[None, :], y2.to(out_ty), mask=mk)
    k1 = _cache_offset(dst, o1[None, :], DK, NZ, K_C0, bs)
    k2 = _cache_offset(dst, o2[None, :], DK, NZ, K_C0, bs)
    if K_QUANT:
        s1 = tl.load(ks_ptr + o1, mask=j < DK // 2, other=0.0)[None, :]
        s2 = tl.load(ks_ptr + o2, mask=j < DK // 2, other=0.0)[None, :]
        tl.store(kc_ptr + k1, store_int8(y1 * s1), mask=mk & write)
        tl.store(kc_ptr + k2, store_int8(y2 * s2), mask=mk & write)
    else:
        tl.store(kc_ptr + k1, y1.to(out_ty), mask=mk & write)
        tl.store(kc_ptr + k2, y2.to(out_ty), mask=mk & write)


def covers(dv: int, dk: int) -> bool:
    """Whether the kernel holds the call's rows (else the launcher runs the reference)."""
    return dv <= MAX_ROW and dk <= MAX_ROW


def run(kv, gamma, cos, sin, eps, dst, k_scale, v_scale, outs, k_cache, ckv_cache, *, nz,
        block_size, k_c0, v_c0):
    """kv (B, 1, S, Dv + Dk) with gamma (Dv,), epsilon ``eps``, cos / sin (B, 1, S or 1,
    Dk; kv's dtype) and ``dst`` (B * S cache rows, -1: not written) into ``outs`` = (k_cache out, ckv_cache out,
    k_rope, c_kv) (their fake's allocations): the caches start as copies of ``k_cache`` /
    ``ckv_cache``; returns ``outs``."""
    o = Outputs(*outs)
    o.bufs[0].copy_(k_cache)
    o.bufs[1].copy_(ckv_cache)
    b, _, s, d = kv.shape
    dv = gamma.shape[0]
    dk = d - dv
    rows = b * s
    if rows:
        kv = kv.contiguous()
        c, sn = (t.expand(b, 1, s, dk) for t in (cos, sin))
        if c.stride() != sn.stride():
            c, sn = c.contiguous(), sn.contiguous()
        block_v, block_p = block_for(dv), block_for(dk // 2)
        block_r = max(1, TILE // block_v)
        wide = max(kv.numel(), o.bufs[0].numel(), o.bufs[1].numel()) >= 2**31
        launch(_kv_rmsnorm_rope_cache, (triton.cdiv(rows, block_r),), kv, gamma.contiguous(),
               c, sn, dst.contiguous(),
               k_scale if k_scale is not None else gamma, v_scale if v_scale is not None else gamma,
               o.bufs[2], o.bufs[3], o.bufs[0], o.bufs[1], rows, s, c.stride(0), c.stride(2),
               c.stride(3), 1.0 / dv, float(eps), max(block_size, 1),
               DV=dv, DK=dk, BLOCK_R=block_r, BLOCK_V=block_v, BLOCK_P=block_p,
               K_QUANT=k_scale is not None, V_QUANT=v_scale is not None, NZ=nz, K_C0=k_c0,
               V_C0=v_c0, WIDE=wide, num_warps=4)
    return o.done()


@triton.jit
def _cache_store(c_ptr, s_ptr, o_ptr, v, col, dst, m, bs, hd,
                 QUANT: tl.constexpr, OFFSET: tl.constexpr, W: tl.constexpr, C0: tl.constexpr):
    """npu_qkv_rms_norm_rope_cache's store of one head's values ``v`` (float32; columns
    ``col`` of the head's D, its first column ``hd`` of the cache row's W) at cache row
    ``dst`` (FRACTAL_NZ): the value rounded to the cache's dtype, or int8 as
    ``round_half_even(v / scale (+ offset))`` saturated."""
    at = _cache_offset(dst, hd + col, W, True, C0, bs)
    if QUANT:
        q = div(v, tl.load(s_ptr + hd + col, mask=m, other=1.0))
        if OFFSET:
            q = q + tl.load(o_ptr + hd + col, mask=m, other=0.0)
        tl.store(c_ptr + at, store_int8(q), mask=m)
    else:
        tl.store(c_ptr + at, v.to(c_ptr.dtype.element_ty), mask=m)


@triton.jit
def _qkv_rms_norm_rope_cache(x_ptr, qg_ptr, kg_ptr, c_ptr, s_ptr, dst_ptr, ks_ptr, vs_ptr,
                             ko_ptr, vo_ptr, qo_ptr, qr_ptr, kr_ptr, vr_ptr, kc_ptr, vc_ptr,
                             rows, per, ct0, ct1, eps, bs,
                             NQ: tl.constexpr, NK: tl.constexpr, NV: tl.constexpr,
                             D: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_P: tl.constexpr,
                             K_QUANT: tl.constexpr, V_QUANT: tl.constexpr,
                             K_OFF: tl.constexpr, V_OFF: tl.constexpr, OUT_QKV: tl.constexpr,
                             K_C0: tl.constexpr, V_C0: tl.constexpr, WIDE: tl.constexpr):
    """npu_qkv_rms_norm_rope_cache: a program holds BLOCK_R tokens of one head (axis 1:
    the q heads, then k's, then v's), the head's halves as the "half" mode's pairs (j, j +
    D / 2)."""
    h = tl.program_id(1)
    r = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    if WIDE:
        r = tl.cast(r, tl.int64)
    live = r < rows
    j = tl.arange(0, BLOCK_P)
    jm = j < D // 2
    m = live[:, None] & jm[None, :]
    j2 = j + D // 2
    xb = r[:, None] * ((NQ + NK + NV) * D) + h * D
    x1 = tl.load(x_ptr + xb + j[None, :], mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + xb + j2[None, :], mask=m, other=0.0).to(tl.float32)
    dst = tl.load(dst_ptr + r, mask=live, other=-1)[:, None]
    w = m & (dst >= 0)
    if h < NQ + NK:
        # the golden's RMSNorm in float32, x / sqrt(sum(x^2) / D + eps) * gamma (the sum a
        # tree sum: the reference's order differs), then the "half" rotation
        if h < NQ:
            g1 = tl.load(qg_ptr + j, mask=jm, other=0.0)
            g2 = tl.load(qg_ptr + j2, mask=jm, other=0.0)
        else:
            g1 = tl.load(kg_ptr + j, mask=jm, other=0.0)
            g2 = tl.load(kg_ptr + j2, mask=jm, other=0.0)
        ss = tl.sum(mul(x1, x1, m), axis=1) + tl.sum(mul(x2, x2, m), axis=1)
        den = sqrt(div(ss, D * 1.0) + eps)[:, None]
        n1 = mul(div(x1, den), g1.to(tl.float32)[None, :], m)
        n2 = mul(div(x2, den), g2.to(tl.float32)[None, :], m)
        ro = ((r // per) * ct0)[:, None]
        y1, y2 = _rotate(n1, n2, c_ptr, s_ptr, ro, j, j2, ct1, m)
        if h < NQ:
            qb = r[:, None] * (NQ * D) + h * D
            _halves(qo_ptr, qb, j, j2, y1, y2, m)
            if OUT_QKV:
                _halves(qr_ptr, qb, j, j2, y1, y2, m)
        else:
            hd = (h - NQ) * D
            if OUT_QKV:
                _halves(kr_ptr, r[:, None] * (NK * D) + hd, j, j2, y1, y2, m)
            _cache_halves(kc_ptr, ks_ptr, ko_ptr, y1, y2, j, j2, dst, w, bs, hd, K_QUANT, K_OFF,
                          NK * D, K_C0)
    else:
        # v as it is (its cache values from qkv's own values)
        hd = (h - NQ - NK) * D
        if OUT_QKV:
            _halves(vr_ptr, r[:, None] * (NV * D) + hd, j, j2, x1, x2, m)
        _cache_halves(vc_ptr, vs_ptr, vo_ptr, x1, x2, j, j2, dst, w, bs, hd, V_QUANT, V_OFF,
                      NV * D, V_C0)


@triton.jit
def _halves(ptr, base, j, j2, y1, y2, m):
    """A head's two halves (columns j and j2 of rows at ``base``) rounded to ptr's dtype."""
    tl.store(ptr + base + j[None, :], y1.to(ptr.dtype.element_ty), mask=m)
    tl.store(ptr + base + j2[None, :], y2.to(ptr.dtype.element_ty), mask=m)


@triton.jit
def _cache_halves(c_ptr, s_ptr, o_ptr, y1, y2, j, j2, dst, m, bs, hd, QUANT: tl.constexpr,
                  OFFSET: tl.constexpr, W: tl.constexpr, C0: tl.constexpr):
    """``_cache_store`` of a head's two halves."""
    _cache_store(c_ptr, s_ptr, o_ptr, y1, j[None, :], dst, m, bs, hd, QUANT, OFFSET, W, C0)
    _cache_store(c_ptr, s_ptr, o_ptr, y2, j2[None, :], dst, m, bs, hd, QUANT, OFFSET, W, C0)


def covers_qkv(d: int) -> bool:
    """Whether npu_qkv_rms_norm_rope_cache's kernel holds a head (else the reference runs)."""
    return d <= MAX_ROW


def run_qkv(qkv, q_gamma, k_gamma, cos, sin, eps, dst, scales, offsets, outs, k_cache, v_cache,
            *, heads, d, per, block_size, k_c0, v_c0, out_qkv):
    """npu_qkv_rms_norm_rope_cache's functional results into ``outs`` = (q, k, v before
    quantisation (0-dim without ``out_qkv``), q_out, k_cache, v_cache: their fake's
    allocations) from qkv (T, (Nq + Nk + Nv) * D), ``heads`` (Nq, Nk, Nv), cos / sin (rows
    of D: token t reads row t // ``per``), ``dst`` (T cache slots, -1: not written),
    ``scales`` / ``offsets`` (k's, v's; None where not given); the caches start as copies of
    ``k_cache`` / ``v_cache``. Returns ``outs``."""
    o = Outputs(*outs)
    o.bufs[4].copy_(k_cache)
    o.bufs[5].copy_(v_cache)
    rows = qkv.shape[0]
    if rows:
        nq, nk, nv = heads
        c, sn = cos, sin
        if c.stride() != sn.stride():
            c, sn = c.contiguous(), sn.contiguous()
        block_p = block_for(d // 2)
        block_r = max(1, TILE // block_p)
        wide = max(qkv.numel(), o.bufs[4].numel(), o.bufs[5].numel()) >= 2**31
        ks, vs = (t.contiguous() if t is not None else q_gamma for t in scales)
        ko, vo = (t.contiguous() if t is not None else q_gamma for t in offsets)
        q_r, k_r, v_r = (o.bufs[i] if out_qkv else o.bufs[3] for i in range(3))
        launch(_qkv_rms_norm_rope_cache, (triton.cdiv(rows, block_r), nq + nk + nv),
               qkv.contiguous(), q_gamma.contiguous(), k_gamma.contiguous(), c, sn,
               dst.contiguous(), ks, vs, ko, vo, o.bufs[3], q_r, k_r, v_r, o.bufs[4],
               o.bufs[5], rows, per, c.stride(0), c.stride(1), float(eps), block_size,
               NQ=nq, NK=nk, NV=nv, D=d, BLOCK_R=block_r, BLOCK_P=block_p,
               K_QUANT=scales[0] is not None, V_QUANT=scales[1] is not None,
               K_OFF=offsets[0] is not None, V_OFF=offsets[1] is not None, OUT_QKV=out_qkv,
               K_C0=k_c0, V_C0=v_c0, WIDE=wide, num_warps=4)
    return o.done()
