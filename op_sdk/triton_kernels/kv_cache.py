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
