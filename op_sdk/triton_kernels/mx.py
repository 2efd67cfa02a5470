"""Triton kernel of the MX quantisation operators (Ascend 950): npu_dynamic_mx_quant's form
of blocks of 32 along the last dim, and the fused norms npu_rms_norm_dynamic_mx_quant /
npu_add_rms_norm_dynamic_mx_quant. One row kernel (``_mx_rows``) whose compile-time
switches give each operator its own kernel.

Per row, as op_sdk/ops/_mx.py computes it (docs/operators.md "MX quantisation"): the
values (``x``, or the fused norms' ``x * rstd * gamma (+ beta)`` of the fp32 ``x`` or
``x1 + x2``, rounded to x's dtype) in blocks of 32, held as (blocks, 16) tiles of the even
and the odd elements (a float4 byte packs one of each); per block the amax, from the
largest magnitude's bits (an inf / NaN: code 255, values 0), the E8M0 code by scale_alg
(0: OCP, 1: cuBLAS), the values times ``2^(127 - code)`` (OCP scales code 0 by 0),
saturated, then float8 by c10's rounding (half to even, on the fp32 bits) or float4 by
round mode at its binade's step. All of it integer and exact fp32 arithmetic: bit for bit
the reference wherever the values are (the fused norms' sum of squares is a tree sum, so
their values can sit one step apart on a rounding boundary, as the norm kernels').
"""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from op_sdk.triton_kernels._common import (
    MAX_ROW,
    Outputs,
    div,
    launch,
    mul,
    rint,
    row_launch,
    rows_of,
    sqrt,
)

BLOCK = 32


def _inv_max_bits(top: float) -> int:
    """The fp32 bits of fl(1 / max): one IEEE fp32 division (scale_alg 1)."""
    inv = np.float32(1.0) / np.float32(top)  # numpy: no tensor, also while traced
    return int(inv.view(np.int32))


@triton.jit
def _float8(w, M: tl.constexpr, B: tl.constexpr):
    """float8 bits of fp32 w (|w| <= the format's max): c10's rounding, half to even,
    subnormals by an fp32 addition of a constant whose ulp is the subnormal step."""
    b_all = w.to(tl.int32, bitcast=True)
    sign = b_all & -2147483648
    b = b_all ^ sign
    denorm = (127 - B + 1 + 23 - M) << 23
    sub = (tl.abs(w) + tl.full(w.shape, denorm, tl.int32).to(tl.float32, bitcast=True)
           ).to(tl.int32, bitcast=True) - denorm
    nrm = (b + ((B - 127) << 23) + ((1 << (22 - M)) - 1) + ((b >> (23 - M)) & 1)) >> (23 - M)
    code = tl.where(b < ((127 - B + 1) << 23), sub, nrm)
    return code | ((sign >> 24) & 128)


@triton.jit
def _float4(w, E2M1: tl.constexpr, ROUND_MODE: tl.constexpr):
    """The 4-bit code of fp32 w (sign in bit 3; a zero keeps w's sign): the format's value
    nearest by the round mode (0 rint, 1 half away from zero, 2 floor) at the step of w's
    binade (e2m1: 0.5 below 2, then 2^(e - 1); e1m2: 0.25), saturated (6 / 1.75)."""
    b = w.to(tl.int32, bitcast=True)
    neg = b < 0
    if E2M1:
        e = tl.maximum(((b >> 23) & 255) - 127, 0)  # binade of |w| (0 below 1)
        step = ((e - 1 + 127) << 23).to(tl.float32, bitcast=True)
        inv = ((127 - e + 1) << 23).to(tl.float32, bitcast=True)
        top = 6.0
    else:
        step = 0.25
        inv = 4.0
        top = 1.75
    t = tl.minimum(tl.maximum(w * inv, -64.0), 64.0)  # exact; past the top either way
    if ROUND_MODE == 0:
        r = rint(t)
    elif ROUND_MODE == 1:
        a = tl.abs(t)
        fa = rint(a)
        fa = fa - tl.where(fa > a, 1.0, 0.0)  # floor(|t|)
        ra = fa + tl.where(a - fa >= 0.5, 1.0, 0.0)
        r = tl.where(neg, -ra, ra)
    else:
        f = rint(t)
        r = f - tl.where(f > t, 1.0, 0.0)
    mag = tl.minimum(tl.abs(r * step), top)
    if E2M1:
        code = tl.where(mag < 2.0, mag * 2.0,
                        tl.where(mag < 4.0, mag + 2.0, tl.where(mag == 4.0, 6.0, 7.0)))
    else:
        code = mag * 4.0
    return code.to(tl.int32) | tl.where(neg, 8, 0)


@triton.jit
def _mx_rows(x1_ptr, x2_ptr, g_ptr, b_ptr, y_ptr, s_ptr, xo_ptr, rstd_ptr,
             rows, n, nf, eps, inv_max_bits, programs,
             NORM: tl.constexpr, ADD: tl.constexpr, BETA: tl.constexpr, DST: tl.constexpr,
             ALG: tl.constexpr, ROUND_MODE: tl.constexpr, EMAX: tl.constexpr,
             TOP: tl.constexpr, BLOCKS: tl.constexpr):
    blk = tl.arange(0, BLOCKS)
    k = tl.arange(0, 16)
    even = blk[:, None] * 32 + 2 * k[None, :]  # (blocks, 16): element 2k of each block
    odd = even + 1
    me = even < n
    mo = odd < n
    nb = (n + 31) // 32
    nf = tl.cast(nf, tl.float32)  # float arguments arrive as fp64 from Inductor's launcher
    eps = tl.cast(eps, tl.float32)
    if NORM:
        ge = tl.load(g_ptr + even, mask=me, other=0.0).to(tl.float32)
        go = tl.load(g_ptr + odd, mask=mo, other=0.0).to(tl.float32)
    if BETA:
        be = tl.load(b_ptr + even, mask=me, other=0.0).to(tl.float32)
        bo = tl.load(b_ptr + odd, mask=mo, other=0.0).to(tl.float32)
    for row in range(tl.program_id(0), rows, programs):
        base = tl.cast(row, tl.int64) * n
        ve = tl.load(x1_ptr + base + even, mask=me, other=0.0).to(tl.float32)
        vo = tl.load(x1_ptr + base + odd, mask=mo, other=0.0).to(tl.float32)
        if ADD:
            ve = ve + tl.load(x2_ptr + base + even, mask=me, other=0.0).to(tl.float32)
            vo = vo + tl.load(x2_ptr + base + odd, mask=mo, other=0.0).to(tl.float32)
            tl.store(xo_ptr + base + even, ve.to(xo_ptr.dtype.element_ty), mask=me)
            tl.store(xo_ptr + base + odd, vo.to(xo_ptr.dtype.element_ty), mask=mo)
        if NORM:
            ss = tl.sum(tl.sum(mul(ve, ve, me), axis=1) + tl.sum(mul(vo, vo, mo), axis=1),
                        axis=0)
            r = div(1.0, sqrt(div(ss, nf) + eps))
            tl.store(rstd_ptr + row, r)
            ve = mul(ve * r, ge, me)
            vo = mul(vo * r, go, mo)
            if BETA:
                ve = ve + be
                vo = vo + bo
            # y rounded to x's dtype, then quantised (padding lanes stay 0)
            ve = tl.where(me, ve.to(x1_ptr.dtype.element_ty).to(tl.float32), 0.0)
            vo = tl.where(mo, vo.to(x1_ptr.dtype.element_ty).to(tl.float32), 0.0)
        # the block's largest |v| by its bits: amax, or an inf / NaN past inf's bits
        m = tl.maximum(tl.max((ve.to(tl.int32, bitcast=True) & 2147483647), axis=1),
                       tl.max((vo.to(tl.int32, bitcast=True) & 2147483647), axis=1))
        finite = m < 2139095040
        e = (m >> 23) & 255
        if ALG == 0:
            code = tl.maximum(e - EMAX, 0)
        else:
            inv_max = (tl.zeros(m.shape, tl.int32) + inv_max_bits).to(tl.float32, bitcast=True)
            sb = (m.to(tl.float32, bitcast=True) * inv_max).to(tl.int32, bitcast=True)
            se = (sb >> 23) & 255
            sm = sb & 8388607
            up = ((se > 0) & (se < 254) & (sm > 0)) | ((se == 0) & (sm > 4194304))
            code = tl.where(m == 0, 0, se + tl.where(up, 1, 0))
        code = tl.where(finite, code, 255)
        # 2^(127 - code), exact (2^-127 a float subnormal); OCP scales code 0 by 0
        factor = tl.where(code < 254, (254 - code) << 23, 4194304).to(tl.float32, bitcast=True)
        if ALG == 0:
            factor = tl.where(code == 0, 0.0, factor)
        factor = tl.where(finite, factor, 0.0)[:, None]
        keep = finite[:, None]
        we = tl.where(keep, tl.minimum(tl.maximum(ve * factor, -TOP), TOP), 0.0)
        wo = tl.where(keep, tl.minimum(tl.maximum(vo * factor, -TOP), TOP), 0.0)
        if DST == 0:
            tl.store(y_ptr + base + even, _float8(we, 3, 7).to(tl.uint8), mask=me)
            tl.store(y_ptr + base + odd, _float8(wo, 3, 7).to(tl.uint8), mask=mo)
        elif DST == 1:
            tl.store(y_ptr + base + even, _float8(we, 2, 15).to(tl.uint8), mask=me)
            tl.store(y_ptr + base + odd, _float8(wo, 2, 15).to(tl.uint8), mask=mo)
        else:
            pair = _float4(we, DST == 2, ROUND_MODE) | (_float4(wo, DST == 2, ROUND_MODE) << 4)
            tl.store(y_ptr + (base // 2) + blk[:, None] * 16 + k[None, :], pair.to(tl.uint8),
                     mask=me)
        # the codes, padded with 0 to an even count
        pairs = (nb + 1) // 2
        sbase = tl.cast(row, tl.int64) * (pairs * 2)
        tl.store(s_ptr + sbase + blk, tl.where(blk < nb, code, 0).to(tl.uint8),
                 mask=blk < pairs * 2)


def fits(n: int) -> bool:
    """Whether rows of ``n`` elements run here (one program holds a row)."""
    return 0 < n <= MAX_ROW


def run(outs, x1, n, f, *, x2=None, gamma=None, beta=None, y=0, scale=1, xo=None, rstd=None,
        eps=1e-6):
    """Run ``_mx_rows`` over the rows of ``x1`` (rows of ``n``) into ``outs``, the
    operator's outputs allocated as its fake allocates them (indices ``y``, ``scale``,
    ``xo``, ``rstd``); ``f`` the call's form (op_sdk/ops/_mx.py ``kernel_form``: destination
    0 - 3 as float8_e4m3fn, float8_e5m2, float4_e2m1, float4_e1m2, scale_alg, round mode,
    the format's emax and max); the norm with ``gamma``. Returns them."""
    out = Outputs(*outs)
    dst, alg, rmode, emax, top = f
    x = rows_of(x1, n)
    rows = x.numel() // n
    if rows:
        bufs = out.bufs
        yb = bufs[y].view(torch.uint8)
        blocks = max(2, triton.next_power_of_2((n + BLOCK - 1) // BLOCK))  # the codes' pairs
        cfg = row_launch(rows, blocks * BLOCK, x.element_size(), x.device, quant=True)
        pick = lambda t: x if t is None else t  # noqa: E731  (a switched-off pointer is never read)
        launch(
            _mx_rows, cfg["grid"], x, pick(None if x2 is None else rows_of(x2, n)),
            pick(None if gamma is None else gamma.contiguous()),
            pick(None if beta is None else beta.contiguous()), yb, bufs[scale],
            pick(None if xo is None else bufs[xo]), pick(None if rstd is None else bufs[rstd]),
            rows, n, float(n), float(eps), _inv_max_bits(top) if dst < 2 else 0,
            cfg["programs"],
            NORM=gamma is not None, ADD=x2 is not None, BETA=beta is not None, DST=dst,
            ALG=alg, ROUND_MODE=rmode, EMAX=emax, TOP=top, BLOCKS=blocks,
            num_warps=cfg["num_warps"])
    return out.done()
