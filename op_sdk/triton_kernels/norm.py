"""Triton kernels of the rms-norm family and the dynamic / static int8 quantisations: one
row kernel (``_rows``) whose compile-time switches give each operator its own kernel.

Per row of ``n = gamma.numel()`` elements, in fp32, as the references compute it
(ops/_norm.py ``_normalize`` and the quantisation helpers of ops/_common.py):
``x = x1 (+ x2)``; ``rstd = 1 / sqrt(sum(x^2) / n + eps)``; ``y = x * rstd * gamma
(+ beta)``; then the int8 stores: static ``v = y / scale (or * scale) (+ zero point)``,
dynamic ``v = y (* smooth)``, ``scale = amax / 127``, ``q = v * (127 / amax)``, each
rounded half to even and saturated (``_common.store_int8``). The sum of squares is a tree
sum in fp32 (the reference's order differs: float outputs agree within rounding, int8 ones
can differ by one step where a value sits on a rounding boundary; docs/triton.md).

Each operator's CUDA kernel (its slice in op_sdk/ops) checks its arguments, allocates its
outputs as its fake does, picks the forms that run here and calls ``run``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from op_sdk.triton_kernels._common import (
    MAX_ROW,
    Outputs,
    _programs_cap,
    abs_bits,
    absmax,
    block_for,
    div,
    launch,
    mul,
    round_saturate,
    row_launch,
    row_warps,
    rows_of,
    sqrt,
    store_int8,
)
from op_sdk.triton_kernels.mx import _float8


@triton.jit
def _hif8(q):
    """The HiFloat8 code (int32, 0..255) of fp32 q: ops/_formats.py ``float_to_hif8``'s rule
    (the nearest HiFloat8 value, a tie away from zero; saturated to +-32768, NaN 0) on the
    bits: |q| rounded at its binade's mantissa width (3 bits for |e| <= 3, 2 for 4..7, 1 for
    8..15, none for the DML binades 2^-22..2^-16; [2^-23, 2^-22) rounds up to 2^-22, below
    it to 0), then the rounded value's dot / exponent / mantissa fields."""
    b = q.to(tl.int32, bitcast=True)
    a = tl.minimum(b & 0x7FFFFFFF, 0x47800000)  # (2^16: any |q| from 2^15 up saturates)
    e = (a >> 23) - 127
    ae = tl.abs(e)
    keep = tl.where(e < -15, 0, tl.where(ae <= 3, 3, tl.where(ae <= 7, 2, 1)))
    r = (a + (1 << (22 - keep))) & ~((1 << (23 - keep)) - 1)
    r = tl.where(e < -23, 0, tl.where(e == -23, 105 << 23, r))  # (105 << 23: 2^-22)
    re = (r >> 23) - 127
    are = tl.abs(re)
    m = r & 0x7FFFFF
    s = tl.where(re < 0, 16, 0)
    code = tl.where(are >= 8, 96 + s + 2 * (are - 8) + (m >> 22),
                    tl.where(are >= 4, 64 + s + 4 * (are - 4) + (m >> 21),
                             tl.where(are >= 2, 32 + s + 8 * (are - 2) + (m >> 20),
                                      tl.where(are == 1, 16 + (s >> 1) + (m >> 20),
                                               8 + (m >> 20)))))
    code = tl.where(re < -15, re + 23, code)
    code = tl.where(r == 0, 0, tl.where(r >= (142 << 23), 110, code))  # (142 << 23: 2^15)
    code = tl.where((code != 0) & (b < 0), code + 128, code)
    return tl.where(q != q, 0, code)


@triton.jit
def _store_float8(q_ptr, offs, q, mask, DST: tl.constexpr):
    """q (fp32) as float8_e4m3fn (DST 2) / float8_e5m2 (3) / HiFloat8 (4) bits into a uint8
    view: float8 saturated to +-max, half to even (``mx._float8``), NaN kept (0x7F); HiFloat8
    by ``_hif8``."""
    if DST == 4:
        tl.store(q_ptr + offs, _hif8(q).to(tl.uint8), mask=mask)
    else:
        top: tl.constexpr = 448.0 if DST == 2 else 57344.0
        nan = q != q
        w = tl.where(nan, 0.0, tl.minimum(tl.maximum(q, -top), top))
        if DST == 2:
            bits = _float8(w, 3, 7)
        else:
            bits = _float8(w, 2, 15)
        tl.store(q_ptr + offs, tl.where(nan, 127, bits).to(tl.uint8), mask=mask)


@triton.jit
def _store_int4(q_ptr, q, n, BLOCK: tl.constexpr):
    """q (fp32) rounded half to even into [-8, 7] (a NaN 0), packed 8 a int32 along the row
    of ``n`` values (a multiple of 8; element 0 in the low nibble: the row as (BLOCK / 8, 8),
    the shifted nibbles or-reduced)."""
    nib = round_saturate(q, -8.0, 7.0).to(tl.int32) & 15
    shift = (tl.arange(0, 8) * 4)[None, :]
    word = tl.reduce(tl.reshape(nib, (BLOCK // 8, 8)) << shift, 1, _or)
    at = tl.arange(0, BLOCK // 8)
    tl.store(q_ptr + at, word, mask=at < n // 8)


@triton.jit
def _static_branch(v, s_ptr, z_ptr, q_ptr, offs, mask, n, HAS_Z: tl.constexpr,
                   DIV: tl.constexpr, F16: tl.constexpr, DST: tl.constexpr, BLOCK: tl.constexpr):
    s = tl.load(s_ptr + offs, mask=mask, other=1.0).to(tl.float32)
    q = div(v, s) if DIV else mul(v, s, mask)
    if HAS_Z:
        q = q + tl.load(z_ptr + offs, mask=mask, other=0).to(tl.float32)
    if F16:  # npu_rms_norm_quant's float16 step before the integer rounding
        q = q.to(tl.float16).to(tl.float32)
    if DST >= 2:
        _store_float8(q_ptr, offs, q, mask, DST)
    elif DST == 1:
        _store_int4(q_ptr, q, n, BLOCK)
    else:
        tl.store(q_ptr + offs, store_int8(q), mask=mask)


@triton.jit
def _or(a, b):
    return a | b


@triton.jit
def _factor(amax, finv, DST: tl.constexpr):
    """(scale, f) of a dynamic quantisation by ``amax`` (one, or one per lane): int8 / int4
    ``scale = amax / dmax`` and ``f = fl(dmax / amax)`` (0 where amax is not > 0), y = v * f;
    the 8-bit floats (the 950 kernels') ``scale = f = amax * finv`` with ``finv = fl(1 /
    DTYPE_MAX)`` (ops/_formats.py ``float8_inv``, from the host), y = v / scale (0 where the
    scale is not > 0). ops/dynamic_quant.py ``quantized`` is the reference."""
    if DST >= 2:
        scale = amax * tl.cast(finv, tl.float32)
        f = scale
    else:
        dmax: tl.constexpr = 7.0 if DST == 1 else 127.0
        f = tl.where(amax > 0, div(dmax, amax), 0.0)
        scale = div(amax, dmax)
    return scale, f


@triton.jit
def _store_by(v, f, q_ptr, offs, mask, n, DST: tl.constexpr, BLOCK: tl.constexpr):
    """v quantised by ``_factor``'s f into the row at q_ptr. DST: 0 int8, 1 int4 (8 a int32,
    element 0 in the low nibble), 2 float8_e4m3fn, 3 float8_e5m2, 4 HiFloat8 (their bits, into a
    uint8 view); NaN stays NaN in a float8 (an inf over an inf amax), 0 in HiFloat8."""
    if DST >= 2:
        _store_float8(q_ptr, offs, tl.where(f > 0, div(v, f), 0.0), mask, DST)
    elif DST == 1:
        _store_int4(q_ptr, v * f, n, BLOCK)
    else:
        tl.store(q_ptr + offs, store_int8(v * f), mask=mask)


@triton.jit
def _dynamic_branch(v, m_ptr, q_ptr, scale_ptr, row, offs, mask, n, finv, HAS_M: tl.constexpr,
                    DST: tl.constexpr, BLOCK: tl.constexpr):
    if HAS_M:
        v = v * tl.load(m_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    scale, f = _factor(absmax(v, mask), finv, DST)
    _store_by(v, f, q_ptr, offs, mask, n, DST, BLOCK)
    tl.store(scale_ptr + row, scale)


@triton.jit
def _smoothed(x_ptr, m_ptr, row, r, offs, mask, n, HAS_M: tl.constexpr, M_ROW: tl.constexpr):
    """Row ``row`` of x in fp32, times its smooth scales: per element of the row, or
    (``M_ROW``, per channel) the one of its row ``r`` within its matrix."""
    v = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_M:
        if M_ROW:
            v = v * tl.load(m_ptr + r).to(tl.float32)
        else:
            v = v * tl.load(m_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    return v


@triton.jit
def _amax_parts(x_ptr, m_ptr, p_ptr, R, n, chunk, chunks, HAS_M: tl.constexpr,
                M_ROW: tl.constexpr, PER_CHANNEL: tl.constexpr, BLOCK: tl.constexpr):
    """Program (b, c): max |v| over rows [c * chunk, (c + 1) * chunk) of matrix b (R rows of
    n), per column (``PER_CHANNEL``) or over all, as int32 bits (``absmax``'s order: NaN
    above inf) into p (b, c[, column])."""
    b = tl.program_id(0)
    c = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros([BLOCK], dtype=tl.int32)
    for r in range(c * chunk, tl.minimum(c * chunk + chunk, R)):
        v = _smoothed(x_ptr, m_ptr, tl.cast(b, tl.int64) * R + r, r, offs, mask, n, HAS_M, M_ROW)
        acc = tl.maximum(acc, abs_bits(v, mask))
    at = tl.cast(b, tl.int64) * chunks + c
    if PER_CHANNEL:
        tl.store(p_ptr + at * n + offs, acc, mask=mask)
    else:
        tl.store(p_ptr + at, tl.max(acc, axis=0))


@triton.jit
def _by_amax(x_ptr, m_ptr, a_ptr, q_ptr, c_ptr, R, n, chunk, finv, HAS_M: tl.constexpr,
             M_ROW: tl.constexpr, PER_CHANNEL: tl.constexpr, DST: tl.constexpr,
             BLOCK: tl.constexpr):
    """Program (b, c): rows [c * chunk, (c + 1) * chunk) of matrix b quantised by the amax
    ``_amax_parts`` found (matrix b's per column, or the tensor's); program (b, 0) stores the
    scales."""
    b = tl.program_id(0)
    c = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    if PER_CHANNEL:
        amax = tl.load(a_ptr + tl.cast(b, tl.int64) * n + offs, mask=mask, other=0.0)
    else:
        amax = tl.load(a_ptr) + tl.zeros([BLOCK], dtype=tl.float32)
    scale, f = _factor(amax, finv, DST)
    for r in range(c * chunk, tl.minimum(c * chunk + chunk, R)):
        row = tl.cast(b, tl.int64) * R + r
        v = _smoothed(x_ptr, m_ptr, row, r, offs, mask, n, HAS_M, M_ROW)
        _store_by(v, f, q_ptr + (row * n // 8 if DST == 1 else row * n), offs, mask, n, DST,
                  BLOCK)
    if c == 0:
        if PER_CHANNEL:
            tl.store(c_ptr + tl.cast(b, tl.int64) * n + offs, scale, mask=mask)
        else:
            tl.store(c_ptr + offs, scale, mask=offs == 0)


@triton.jit
def _rows(x1_ptr, x2_ptr, g_ptr, b_ptr, y_ptr, yf_ptr, xo_ptr, rstd_ptr,
          s1_ptr, z1_ptr, q1_ptr, c1_ptr, s2_ptr, z2_ptr, q2_ptr, c2_ptr,
          grp_ptr, rows, n, nf, eps, finv, programs,
          ADD: tl.constexpr, NORM: tl.constexpr, BETA: tl.constexpr, Y: tl.constexpr,
          YF: tl.constexpr, XO: tl.constexpr, RSTD: tl.constexpr, QUANT: tl.constexpr,
          Q1: tl.constexpr, Q2: tl.constexpr, S1: tl.constexpr, S2: tl.constexpr,
          Z1: tl.constexpr, Z2: tl.constexpr, DIV: tl.constexpr, F16: tl.constexpr,
          DST: tl.constexpr, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    # QUANT: 0 none, 1 static (scales s*, zero points z*), 2 dynamic (smooth scales s*,
    # scales out c*); Q1 / Q2: the branch runs
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    nf = tl.cast(nf, tl.float32)  # float arguments arrive as fp64 from Inductor's launcher
    eps = tl.cast(eps, tl.float32)
    if NORM:
        g = tl.load(g_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if BETA:
        beta = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    for row in range(tl.program_id(0), rows, programs):
        base = tl.cast(row, tl.int64) * n
        at = base + offs
        x = tl.load(x1_ptr + at, mask=mask, other=0.0).to(tl.float32)
        if ADD:
            x = x + tl.load(x2_ptr + at, mask=mask, other=0.0).to(tl.float32)
        if XO:
            tl.store(xo_ptr + at, x.to(xo_ptr.dtype.element_ty), mask=mask)
        v = x
        if NORM:
            r = div(1.0, sqrt(div(tl.sum(mul(x, x, mask), axis=0), nf) + eps))
            if RSTD:
                tl.store(rstd_ptr + row, r)
            v = mul(x * r, g, mask)
            if YF:
                tl.store(yf_ptr + at, v, mask=mask)
            if Y:
                tl.store(y_ptr + at, v.to(y_ptr.dtype.element_ty), mask=mask)
            if BETA:
                v = v + beta
        qbase = base // 8 if DST == 1 else base  # (int4: 8 a word)
        if QUANT == 1:
            if Q1:
                _static_branch(v, s1_ptr, z1_ptr, q1_ptr + qbase, offs, mask, n, Z1, DIV, F16,
                               DST, BLOCK)
            if Q2:
                _static_branch(v, s2_ptr, z2_ptr, q2_ptr + qbase, offs, mask, n, Z2, DIV, F16,
                               DST, BLOCK)
        if QUANT == 2:
            if Q1:
                m1 = s1_ptr
                if GROUPS:  # (MoE: the row's group's smooth scales, grp_ptr its group)
                    m1 = s1_ptr + tl.load(grp_ptr + row) * n
                _dynamic_branch(v, m1, q1_ptr + qbase, c1_ptr, row, offs, mask, n, finv, S1,
                                DST, BLOCK)
            if Q2:
                _dynamic_branch(v, s2_ptr, q2_ptr + qbase, c2_ptr, row, offs, mask, n, finv, S2,
                                DST, BLOCK)


def _launch(x1, n, *, x2=None, gamma=None, beta=None, y=None, yf=None, xo=None, rstd=None,
            quant=0, s1=None, z1=None, q1=None, c1=None, s2=None, z2=None, q2=None, c2=None,
            div_mode=True, f16=False, dst=0, groups=None, eps=1e-6, finv=0.0):
    """Run ``_rows`` over the rows of ``x1`` (every tensor dense, rows of ``n``)."""
    rows = x1.numel() // n
    if rows == 0:
        return
    block = block_for(n)
    cfg = row_launch(rows, block, x1.element_size(), x1.device, quant=quant > 0)
    tensors = (x2, gamma, beta, y, yf, xo, rstd, s1, z1, q1, c1, s2, z2, q2, c2)
    launch(
        _rows, cfg["grid"], x1, *(x1 if t is None else t for t in tensors),  # a switched-off pointer is never read
        x1 if groups is None else groups, rows, n, float(n), float(eps), float(finv),
        cfg["programs"],
        ADD=x2 is not None, NORM=gamma is not None, BETA=beta is not None, Y=y is not None,
        YF=yf is not None, XO=xo is not None, RSTD=rstd is not None, QUANT=quant,
        Q1=q1 is not None, Q2=q2 is not None, S1=s1 is not None, S2=s2 is not None,
        Z1=z1 is not None, Z2=z2 is not None, DIV=bool(div_mode), F16=bool(f16), DST=dst,
        GROUPS=groups is not None, BLOCK=block,
        num_warps=cfg["num_warps"])


def fits(n: int) -> bool:
    """Whether rows of ``n`` elements run here (one program holds a row); the operator's
    reference runs the others (empty rows, rows longer than MAX_ROW)."""
    return 0 < n <= MAX_ROW


# the quantising branches' outputs (``DST``, static and dynamic alike) by the operators'
# codes (ops/_common.py, ops/_formats.py): int8 (int8 / qint8), int4 (quint4x2 /
# torch_npu.int4), float8_e4m3fn (24 / 292), float8_e5m2 (23 / 291), HiFloat8 (290)
DST = {1: 0, 12: 0, 16: 1, 285: 1, 24: 2, 292: 2, 23: 3, 291: 3, 290: 4}


def _bits(t):
    """A float8 output as the uint8 view its bits are stored through."""
    return t.view(torch.uint8) if t.dtype in (torch.float8_e4m3fn, torch.float8_e5m2) else t


_INPUTS = ("x2", "gamma", "beta", "s1", "z1", "s2", "z2")
_OUTPUTS = ("y", "yf", "xo", "rstd", "q1", "c1", "q2", "c2")


def run(outs, x1, n, **kw):
    """Run the row kernel over ``x1`` (rows of ``n``) into ``outs``, the operator's outputs
    allocated as its fake allocates them; returns them. Keywords: the inputs (``x2``,
    ``gamma``, ``beta``, scales / smooth scales ``s1`` / ``s2``, zero points ``z1`` / ``z2``:
    tensors or None), the outputs (``y``, ``yf``, ``xo``, ``rstd``, ``q1``, ``c1``, ``q2``,
    ``c2``: an index into ``outs`` or None), ``quant``, ``div_mode``, ``f16`` (the static
    branches round to float16 before the integer rounding), ``dst`` (the branches' output:
    ``DST``), ``groups`` (each row's MoE group: the first dynamic
    branch's smooth scales are its group's row of ``s1``), ``eps``, ``finv`` (a dynamic 8-bit
    float branch's fl(1 / DTYPE_MAX), ``_factor``)."""
    out = Outputs(*outs)
    args = {k: (rows_of(v, n) if k == "x2" else v.contiguous()) for k, v in kw.items()
            if k in _INPUTS and v is not None}
    args.update({k: _bits(out.bufs[v]) for k, v in kw.items()
                 if k in _OUTPUTS and v is not None})
    args.update({k: v for k, v in kw.items()
                 if k in ("quant", "div_mode", "f16", "dst", "groups", "eps", "finv")})
    _launch(rows_of(x1, n), n, **args)
    return out.done()


def run_by_amax(outs, x, smooth, per_channel: bool, dst: int, finv: float = 0.0):
    """npu_dynamic_quant's per-tensor / per-channel modes into ``outs`` (y, scale as its fake
    allocates them): one pass finds the amax (per column of each matrix of x's last two dims,
    or of the whole tensor; NaN propagating), a second quantises by it. ``smooth``: per element
    of a row (per tensor) or per row of a matrix (per channel), or None; ``finv``: an 8-bit
    float output's fl(1 / DTYPE_MAX)."""
    out = Outputs(*outs)
    n = x.shape[-1]
    R = x.shape[-2] if per_channel else x.numel() // n
    b = x.numel() // n // R
    xs = rows_of(x, n)
    m = xs if smooth is None else smooth.contiguous()
    chunks = torch.sym_min(R, torch.sym_max(1, _programs_cap(x.device) // b))
    chunk = (R + chunks - 1) // chunks
    block = block_for(n)
    warps = row_warps(block, x.element_size(), quant=True)
    flags = {"HAS_M": smooth is not None, "M_ROW": per_channel, "PER_CHANNEL": per_channel,
             "BLOCK": block}
    parts = torch.empty((b, chunks, n) if per_channel else (b * chunks,), dtype=torch.int32,
                        device=x.device)
    launch(_amax_parts, (b, chunks), xs, m, parts, R, n, chunk, chunks, **flags, num_warps=warps)
    amax = (parts.amax(1) if per_channel else parts.amax().reshape(1)).view(torch.float32)
    launch(_by_amax, (b, chunks), xs, m, amax, _bits(out.bufs[0]), out.bufs[1], R, n, chunk,
           float(finv), **flags, DST=dst, num_warps=warps)
    return out.done()
