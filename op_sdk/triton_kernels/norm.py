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
"""

from __future__ import annotations

import triton
import triton.language as tl

from op_sdk.triton_kernels._common import (
    MAX_ROW,
    Outputs,
    absmax,
    block_for,
    div,
    options,
    row_launch,
    rows_of,
    sqrt,
    store_int8,
)


@triton.jit
def _load(ptr, offs, mask, other, ON: tl.constexpr):
    """A per-column vector as fp32 (loaded once per program, before the row loop)."""
    if ON:
        return tl.load(ptr + offs, mask=mask, other=other).to(tl.float32)
    return tl.full(offs.shape, other, tl.float32)


@triton.jit
def _static_branch(v, s, z, q_ptr, offs, mask, DIV: tl.constexpr):
    q = div(v, s) if DIV else v * s
    tl.store(q_ptr + offs, store_int8(q + z), mask=mask)


@triton.jit
def _dynamic_branch(v, m, q_ptr, scale_ptr, row, offs, mask):
    v = v * m
    amax = absmax(v, mask)
    inv = tl.where(amax > 0, div(127.0, amax), 0.0)
    tl.store(q_ptr + offs, store_int8(v * inv), mask=mask)
    tl.store(scale_ptr + row, div(amax, 127.0))


@triton.jit
def _rows(x1_ptr, x2_ptr, g_ptr, b_ptr, y_ptr, yf_ptr, xo_ptr, rstd_ptr,
          s1_ptr, z1_ptr, q1_ptr, c1_ptr, s2_ptr, z2_ptr, q2_ptr, c2_ptr,
          rows, n, nf, eps, programs,
          ADD: tl.constexpr, NORM: tl.constexpr, BETA: tl.constexpr, Y: tl.constexpr,
          YF: tl.constexpr, XO: tl.constexpr, RSTD: tl.constexpr, QUANT: tl.constexpr,
          Q1: tl.constexpr, Q2: tl.constexpr, S1: tl.constexpr, S2: tl.constexpr,
          Z1: tl.constexpr, Z2: tl.constexpr, DIV: tl.constexpr, BLOCK: tl.constexpr):
    # QUANT: 0 none, 1 static (scales s*, zero points z*), 2 dynamic (smooth scales s*,
    # scales out c*); Q1 / Q2: the branch runs
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    g = _load(g_ptr, offs, mask, 0.0, NORM)
    beta = _load(b_ptr, offs, mask, 0.0, BETA)
    # the quantisations' per-column vectors: scales (static, 1 where unused) or smooth
    # scales (dynamic, 1 where absent), zero points (-0 where absent): x * 1 and x + -0 are
    # x, bit for bit
    s1 = _load(s1_ptr, offs, mask, 1.0, (QUANT == 1 and Q1) or (QUANT == 2 and S1))
    s2 = _load(s2_ptr, offs, mask, 1.0, (QUANT == 1 and Q2) or (QUANT == 2 and S2))
    z1 = _load(z1_ptr, offs, mask, -0.0, QUANT == 1 and Z1)
    z2 = _load(z2_ptr, offs, mask, -0.0, QUANT == 1 and Z2)
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
            r = div(1.0, sqrt(div(tl.sum(x * x, axis=0), nf) + eps))
            if RSTD:
                tl.store(rstd_ptr + row, r)
            v = x * r * g
            if YF:
                tl.store(yf_ptr + at, v, mask=mask)
            if Y:
                tl.store(y_ptr + at, v.to(y_ptr.dtype.element_ty), mask=mask)
            if BETA:
                v = v + beta
        if QUANT == 1:
            if Q1:
                _static_branch(v, s1, z1, q1_ptr + base, offs, mask, DIV)
            if Q2:
                _static_branch(v, s2, z2, q2_ptr + base, offs, mask, DIV)
        if QUANT == 2:
            if Q1:
                _dynamic_branch(v, s1, q1_ptr + base, c1_ptr, row, offs, mask)
            if Q2:
                _dynamic_branch(v, s2, q2_ptr + base, c2_ptr, row, offs, mask)


def _launch(x1, n, *, x2=None, gamma=None, beta=None, y=None, yf=None, xo=None, rstd=None,
            quant=0, s1=None, z1=None, q1=None, c1=None, s2=None, z2=None, q2=None, c2=None,
            div_mode=True, eps=1e-6):
    """Run ``_rows`` over the rows of ``x1`` (every tensor dense, rows of ``n``)."""
    rows = x1.numel() // n
    if rows == 0:
        return
    block = block_for(n)
    cfg = row_launch(rows, block, x1.element_size(), x1.device)
    d = x1  # any tensor: the pointer of an argument a switch turns off is never read
    _rows[cfg["grid"]](
        x1, d if x2 is None else x2, d if gamma is None else gamma, d if beta is None else beta,
        d if y is None else y, d if yf is None else yf, d if xo is None else xo,
        d if rstd is None else rstd,
        d if s1 is None else s1, d if z1 is None else z1, d if q1 is None else q1,
        d if c1 is None else c1, d if s2 is None else s2, d if z2 is None else z2,
        d if q2 is None else q2, d if c2 is None else c2,
        rows, n, float(n), float(eps), cfg["programs"],
        ADD=x2 is not None, NORM=gamma is not None, BETA=beta is not None, Y=y is not None,
        YF=yf is not None, XO=xo is not None, RSTD=rstd is not None, QUANT=quant,
        Q1=q1 is not None, Q2=q2 is not None, S1=s1 is not None, S2=s2 is not None,
        Z1=z1 is not None, Z2=z2 is not None, DIV=bool(div_mode), BLOCK=block,
        num_warps=cfg["num_warps"], **options(x1.device))


def _dense(t):
    return None if t is None else t.contiguous()


def _fits(n: int) -> bool:
    return 0 < n <= MAX_ROW


def rms_norm(input, gamma, epsilon=1e-6):
    """npu_rms_norm. Rows longer than MAX_ROW and empty rows run the reference."""
    from op_sdk.ops.rms_norm import rms_norm_fake, rms_norm_reference

    y, rstd = rms_norm_fake(input, gamma, epsilon)
    n = gamma.numel()
    if not _fits(n):
        return rms_norm_reference(input, gamma, epsilon)
    out = Outputs(y, rstd)
    _launch(rows_of(input, n), n, gamma=_dense(gamma), y=out.bufs[0], rstd=out.bufs[1],
            eps=epsilon)
    return out.done()


def add_rms_norm(x1, x2, gamma, epsilon=1e-6):
    """npu_add_rms_norm. Rows longer than MAX_ROW and empty rows run the reference."""
    from op_sdk.ops.add_rms_norm import add_rms_norm_fake, add_rms_norm_reference

    y, rstd, x = add_rms_norm_fake(x1, x2, gamma, epsilon)
    n = gamma.numel()
    if not _fits(n):
        return add_rms_norm_reference(x1, x2, gamma, epsilon)
    out = Outputs(y, rstd, x)
    _launch(rows_of(x1, n), n, x2=rows_of(x2, n), gamma=_dense(gamma), y=out.bufs[0],
            rstd=out.bufs[1], xo=out.bufs[2], eps=epsilon)
    return out.done()


def add_rms_norm_cast(x1, x2, gamma, epsilon=1e-6):
    """npu_add_rms_norm_cast. Rows longer than MAX_ROW and empty rows run the reference."""
    from op_sdk.ops.add_rms_norm_cast import add_rms_norm_cast_fake, add_rms_norm_cast_reference

    y1, y2, rstd, x = add_rms_norm_cast_fake(x1, x2, gamma, epsilon)
    n = gamma.numel()
    if not _fits(n):
        return add_rms_norm_cast_reference(x1, x2, gamma, epsilon)
    out = Outputs(y1, y2, rstd, x)
    _launch(rows_of(x1, n), n, x2=rows_of(x2, n), gamma=_dense(gamma), yf=out.bufs[0],
            y=out.bufs[1], rstd=out.bufs[2], xo=out.bufs[3], eps=epsilon)
    return out.done()


def add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1, beta=None, scales2=None,
                       zero_points2=None, *, axis=-1, epsilon=1e-6, div_mode=True,
                       dst_type=None):
    """npu_add_rms_norm_quant. The int8 outputs run here; 8-bit float outputs, rows longer
    than MAX_ROW and empty rows run the reference."""
    from op_sdk.ops._common import INT8, QINT8
    from op_sdk.ops.add_rms_norm_quant import (
        add_rms_norm_quant_fake,
        add_rms_norm_quant_reference,
        check_add_rms_norm_quant,
    )

    args = (x1, x2, gamma, scales1, zero_points1, beta, scales2, zero_points2)
    kw = {"axis": axis, "epsilon": epsilon, "div_mode": div_mode, "dst_type": dst_type}
    code = check_add_rms_norm_quant(*args, axis, dst_type)
    n = gamma.numel()
    if code not in (INT8, QINT8) or not _fits(n):
        return add_rms_norm_quant_reference(*args, **kw)
    y1, y2, x = add_rms_norm_quant_fake(*args, **kw)
    out = Outputs(y1, y2, x)
    if scales2 is None:
        out.bufs[1].zero_()
    _launch(rows_of(x1, n), n, x2=rows_of(x2, n), gamma=_dense(gamma), beta=_dense(beta),
            xo=out.bufs[2], quant=1, s1=_dense(scales1), z1=_dense(zero_points1),
            q1=out.bufs[0], s2=_dense(scales2), z2=_dense(zero_points2),
            q2=None if scales2 is None else out.bufs[1], div_mode=div_mode, eps=epsilon)
    return out.done()


def add_rms_norm_dynamic_quant(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None,
                               beta=None, epsilon=1e-6, output_mask=None, y_dtype=None):
    """npu_add_rms_norm_dynamic_quant. int8 outputs run here; int4 and 8-bit float outputs,
    rows longer than MAX_ROW and empty rows run the reference."""
    from op_sdk.ops._common import INT8
    from op_sdk.ops.add_rms_norm_dynamic_quant import (
        add_rms_norm_dynamic_quant_fake,
        add_rms_norm_dynamic_quant_reference,
        check_add_rms_norm_dynamic_quant,
    )

    kw = {"smooth_scale1": smooth_scale1, "smooth_scale2": smooth_scale2, "beta": beta,
          "epsilon": epsilon, "output_mask": output_mask, "y_dtype": y_dtype}
    run, code = check_add_rms_norm_dynamic_quant(x1, x2, gamma, smooth_scale1, smooth_scale2,
                                                 beta, output_mask, y_dtype)
    n = gamma.numel()
    if code != INT8 or not _fits(n):
        return add_rms_norm_dynamic_quant_reference(x1, x2, gamma, **kw)
    y1, y2, x, c1, c2 = add_rms_norm_dynamic_quant_fake(x1, x2, gamma, **kw)
    out = Outputs(y1, y2, x, c1, c2)
    b = out.bufs
    _launch(rows_of(x1, n), n, x2=rows_of(x2, n), gamma=_dense(gamma), beta=_dense(beta),
            xo=b[2], quant=2, s1=_dense(smooth_scale1), q1=b[0] if run[0] else None,
            c1=b[3] if run[0] else None, s2=_dense(smooth_scale2),
            q2=b[1] if run[1] else None, c2=b[4] if run[1] else None, eps=epsilon)
    return out.done()


def dynamic_quant(input, *, smooth_scales=None, group_index=None, dst_type=None,
                  quant_mode="pertoken", dst_type_max=0.0):
    """npu_dynamic_quant. int8 per token (with or without smooth_scales) runs here; int4,
    8-bit float outputs, per-tensor / per-channel modes, MoE groups, rows longer than
    MAX_ROW and empty rows run the reference."""
    from op_sdk.ops._common import INT8
    from op_sdk.ops.dynamic_quant import (
        check_dynamic_quant,
        dynamic_quant_fake,
        dynamic_quant_reference,
    )

    kw = {"smooth_scales": smooth_scales, "group_index": group_index, "dst_type": dst_type,
          "quant_mode": quant_mode, "dst_type_max": dst_type_max}
    code = check_dynamic_quant(input, smooth_scales, group_index, dst_type, quant_mode,
                               dst_type_max)
    n = input.shape[-1]
    if code != INT8 or quant_mode != "pertoken" or group_index is not None or not _fits(n):
        return dynamic_quant_reference(input, **kw)
    y, scale = dynamic_quant_fake(input, **kw)
    out = Outputs(y, scale)
    _launch(rows_of(input, n), n, quant=2, s1=_dense(smooth_scales), q1=out.bufs[0],
            c1=out.bufs[1])
    return out.done()
