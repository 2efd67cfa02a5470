"""Triton kernels of npu_swiglu, npu_swiglu_backward (ops/swiglu.py's contract),
npu_swiglu_quant (ops/swiglu_quant.py's), npu_clipped_swiglu (ops/clipped_swiglu.py's) and
npu_dequant_swiglu_quant (ops/dequant_swiglu_quant.py's).

SwiGLU and its backward read ``input`` as an (outer, 2, inner) array around ``dim``
(``inner``: half the size along ``dim`` times the elements after it), so any ``dim`` is one
pass over (outer, inner) tiles (``_common.tile``): ``a`` and ``b`` of an output element sit
``inner`` apart, and no element index is divided. float32 inside, rounded once. sigmoid is
``1 / (1 + exp(-a))`` with Triton's exp (the reference's torch silu on CPU uses another exp:
results agree within the dtype's tolerance, not bit for bit; docs/triton.md).

npu_swiglu_quant is a row kernel (the rows of ``x``, halves of N): the same SwiGLU of the
activated half, times the smooth scales, then the static store (``+ offsets``) or the
dynamic one (``scale = 127 / max|t|`` per row, ``q = t * scale``), each rounded half to even
and saturated (``_common.store_int8``), as the reference computes them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from op_sdk.triton_kernels._common import (
    Outputs, absmax, block_for, div, launch, mul, row_launch, rows_of, store_int8, tile, tiled)


@triton.jit
def _sigmoid(v):
    return div(1.0, 1.0 + tl.exp(-v))


@triton.jit
def _swiglu(x_ptr, y_ptr, outer, inner,
            BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, WIDE: tl.constexpr):
    r, c, m = tile(outer, inner, BLOCK_R, BLOCK_C, WIDE)
    at = r[:, None] * (2 * inner) + c[None, :]
    a = tl.load(x_ptr + at, mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + at + inner, mask=m, other=0.0).to(tl.float32)
    y = a * _sigmoid(a) * b
    tl.store(y_ptr + r[:, None] * inner + c[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _swiglu_backward(g_ptr, x_ptr, dx_ptr, outer, inner,
                     BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, WIDE: tl.constexpr):
    r, c, m = tile(outer, inner, BLOCK_R, BLOCK_C, WIDE)
    at = r[:, None] * (2 * inner) + c[None, :]
    g = tl.load(g_ptr + r[:, None] * inner + c[None, :], mask=m, other=0.0).to(tl.float32)
    a = tl.load(x_ptr + at, mask=m, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + at + inner, mask=m, other=0.0).to(tl.float32)
    s = _sigmoid(a)
    da = g * (s + mul(s * (1.0 - s), a, m)) * b
    db = g * s * a
    tl.store(dx_ptr + at, da.to(dx_ptr.dtype.element_ty), mask=m)
    tl.store(dx_ptr + at + inner, db.to(dx_ptr.dtype.element_ty), mask=m)


@triton.jit
def _row_param(ptr, offs, mask, KIND: tl.constexpr):
    # a row's parameter: per channel (KIND 1: N values; masked lanes 1.0, never stored) or one
    # value for the tensor (KIND 2)
    if KIND == 1:
        return tl.load(ptr + offs, mask=mask, other=1.0)
    else:
        return tl.load(ptr)


@triton.jit
def _group_param(ptr, g, n, offs, mask, other, KIND: tl.constexpr):
    # MoE group g's parameter (KIND as _row_param's; a row after the last group, g = -1,
    # gets ``other``: its value is left as it is)
    if KIND == 1:
        return tl.load(ptr + tl.maximum(g, 0) * n + offs, mask=mask & (g >= 0), other=other)
    else:
        return tl.where(g >= 0, tl.load(ptr + tl.maximum(g, 0)), other)


@triton.jit
def _swiglu_quant(x_ptr, sm_ptr, of_ptr, g_ptr, q_ptr, scale_ptr, rows, n, programs,
                  LEFT: tl.constexpr, SMOOTH: tl.constexpr, OFFSET: tl.constexpr,
                  DYNAMIC: tl.constexpr, GROUPS: tl.constexpr, BLOCK: tl.constexpr):
    # SMOOTH / OFFSET: 0 none, 1 per channel (N values), 2 per tensor (one value); GROUPS:
    # each row's MoE group read from g_ptr (-1: after the last group, not smoothed)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    if not GROUPS:
        if SMOOTH > 0:
            sm = _row_param(sm_ptr, offs, mask, SMOOTH)
        if OFFSET > 0:
            of = _row_param(of_ptr, offs, mask, OFFSET)
    for row in range(tl.program_id(0), rows, programs):
        if GROUPS:
            g = tl.load(g_ptr + row)
            if SMOOTH > 0:
                sm = _group_param(sm_ptr, g, n, offs, mask, 1.0, SMOOTH)
            if OFFSET > 0:
                of = _group_param(of_ptr, g, n, offs, mask, 0.0, OFFSET)
        at = tl.cast(row, tl.int64) * (2 * n) + offs
        a = tl.load(x_ptr + at, mask=mask, other=0.0).to(tl.float32)
        b = tl.load(x_ptr + at + n, mask=mask, other=0.0).to(tl.float32)
        if LEFT:
            t = a * _sigmoid(a) * b
        else:
            t = a * (b * _sigmoid(b))
        if SMOOTH > 0:
            t = mul(t, sm, mask)
        if OFFSET > 0:
            t = t + of
        out = tl.cast(row, tl.int64) * n + offs
        if DYNAMIC:
            scale = div(127.0, absmax(t, mask))  # inf for an all-zero row, NaN for a NaN
            tl.store(q_ptr + out, store_int8(t * scale), mask=mask)
            tl.store(scale_ptr + row, scale)
        else:
            tl.store(q_ptr + out, store_int8(t), mask=mask)
            tl.store(scale_ptr + row, 0.0)


@triton.jit
def _clipped_swiglu(x_ptr, y_ptr, pre, half, rows, neg_alpha, limit, bias,
                    INTERLEAVED: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                    WIDE: tl.constexpr):
    # npu_clipped_swiglu over (pre, half) tiles of the output: row r reads its 2 * half inputs
    # as adjacent pairs (INTERLEAVED) or as two halves; rows from `rows` on are 0. min / max
    # propagate a NaN (torch.clamp's rule, the reference's).
    r, c, m = tile(pre, half, BLOCK_R, BLOCK_C, WIDE)
    live = m & (r < rows)[:, None]
    base = r[:, None] * (2 * half)
    if INTERLEAVED:
        at = base + 2 * c[None, :]
        bt = at + 1
    else:
        at = base + c[None, :]
        bt = at + half
    a = tl.load(x_ptr + at, mask=live, other=0.0).to(tl.float32)
    b = tl.load(x_ptr + bt, mask=live, other=0.0).to(tl.float32)
    y = tl.where(live, _clip(a, b, neg_alpha, limit, bias, live), 0.0)
    tl.store(y_ptr + r[:, None] * half + c[None, :], y.to(y_ptr.dtype.element_ty), mask=m)


@triton.jit
def _clip(a, b, neg_alpha, limit, bias, mask):
    # the clipped SwiGLU of float32 lanes (ops/clipped_swiglu.py clipped_glu): min / max
    # propagate a NaN (torch.clamp's rule, the reference's); the product rounded on its own
    # (a static quantisation's offset may be added to it)
    a = tl.minimum(a, limit, propagate_nan=tl.PropagateNan.ALL)
    b = tl.maximum(tl.minimum(b, limit, propagate_nan=tl.PropagateNan.ALL), -limit,
                   propagate_nan=tl.PropagateNan.ALL) + bias
    return mul(b, div(a, tl.exp(a * neg_alpha) + 1.0), mask)


@triton.jit
def _dequant_half(x_ptr, ws_ptr, bi_ptr, bf_ptr, act, at, pos, mask, WS: tl.constexpr,
                  ACT: tl.constexpr, BIAS: tl.constexpr):
    # one half (or lane set) of a row of npu_dequant_swiglu_quant dequantised: x[at] (+ an
    # int32 bias in int32), float32, * weight_scale[pos], * the row's scale, + a float bias
    # (BIAS: 0 none, 1 int32, 2 float)
    v = tl.load(x_ptr + at, mask=mask, other=0)
    if BIAS == 1:
        v = v + tl.load(bi_ptr + pos, mask=mask, other=0)
    v = v.to(tl.float32)
    if WS:
        v = mul(v, tl.load(ws_ptr + pos, mask=mask, other=0.0), mask)
    if ACT:
        v = mul(v, act, mask)
    if BIAS == 2:
        v = v + tl.load(bf_ptr + pos, mask=mask, other=0.0)
    return v


@triton.jit
def _dequant_swiglu_quant(x_ptr, ws_ptr, act_ptr, bi_ptr, bf_ptr, qs_ptr, qo_ptr, g_ptr, q_ptr,
                          scale_ptr, rows, n, programs, neg_alpha, limit, glu_bias,
                          ws_g, bi_g, qs_g, qo_g,
                          MODE: tl.constexpr, LEFT: tl.constexpr, WS: tl.constexpr,
                          ACT: tl.constexpr, BIAS: tl.constexpr, QS: tl.constexpr,
                          QO: tl.constexpr, DYNAMIC: tl.constexpr, GROUPS: tl.constexpr,
                          BLOCK: tl.constexpr):
    # npu_dequant_swiglu_quant of rows of 2N: A / B the halves (MODE 0 / 2; LEFT picks A) or
    # the even / odd elements (MODE 1); QS / QO: 0 none, 1 per channel, 2 one value. GROUPS:
    # each row's MoE group read from g_ptr (-1 past the groups: y 0, scale 0), a parameter's
    # group g at g * its *_g elements (0: one for every group)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    if MODE == 1:
        pa = 2 * offs
        pb = pa + 1
    elif LEFT:
        pa = offs
        pb = offs + n
    else:
        pa = offs + n
        pb = offs
    if not GROUPS:
        if QS > 0:
            qs = _row_param(qs_ptr, offs, mask, QS)
        if QO > 0:
            qo = _row_param(qo_ptr, offs, mask, QO)
    for row in range(tl.program_id(0), rows, programs):
        base = tl.cast(row, tl.int64) * (2 * n)
        act = 1.0
        if ACT:
            act = tl.load(act_ptr + row)
        if GROUPS:
            g = tl.load(g_ptr + row)
            gi = tl.maximum(g, 0)
            ws_row, bi_row, bf_row = ws_ptr + gi * ws_g, bi_ptr + gi * bi_g, bf_ptr + gi * bi_g
            if QS > 0:
                qs = _row_param(qs_ptr + gi * qs_g, offs, mask, QS)
            if QO > 0:
                qo = _row_param(qo_ptr + gi * qo_g, offs, mask, QO)
        else:
            ws_row, bi_row, bf_row = ws_ptr, bi_ptr, bf_ptr
        a = _dequant_half(x_ptr, ws_row, bi_row, bf_row, act, base + pa, pa, mask, WS, ACT, BIAS)
        b = _dequant_half(x_ptr, ws_row, bi_row, bf_row, act, base + pb, pb, mask, WS, ACT, BIAS)
        if MODE == 0:
            t = mul(a * _sigmoid(a), b, mask)
        else:
            t = _clip(a, b, neg_alpha, limit, glu_bias, mask)
        out = tl.cast(row, tl.int64) * n + offs
        if DYNAMIC:
            if QS > 0:
                t = mul(t, qs, mask)
            amax = absmax(t, mask)
            q = store_int8(t * div(127.0, amax))
            sc = div(amax, 127.0)
        else:
            if QS > 0:
                t = div(t, qs)
            if QO > 0:
                t = t + qo
            q = store_int8(t)
            sc = 0.0
        if GROUPS:  # (rows past the groups: 0)
            q = tl.where(g >= 0, q, 0)
            sc = tl.where(g >= 0, sc, 0.0)
        tl.store(q_ptr + out, q, mask=mask)
        tl.store(scale_ptr + row, sc)


def run_dequant_quant(x, y, scale, *, weight_scale=None, activation_scale=None, bias=None,
                      quant_scale=None, quant_offset=None, activate_left=False, quant_mode=0,
                      swiglu_mode=0, clamp_limit=7.0, glu_alpha=1.702, glu_bias=1.0,
                      groups=None, **_):
    """npu_dequant_swiglu_quant of ``x`` (rows of 2N) into ``y`` / ``scale`` (the fake's
    allocations); float parameters read as float32, each of one group or (with ``groups``,
    each row's group, -1 past them: ``row_groups``) of G; returns (y, scale)."""
    o = Outputs(y, scale)
    n = y.shape[-1]
    rows = x.numel() // (2 * n)
    if rows:
        block = block_for(n)
        cfg = row_launch(rows, 2 * block, x.element_size(), x.device, quant=True)
        dynamic = quant_mode == 1

        def f32(t):  # a parameter as float32; an absent one a switched-off pointer (never read)
            return x if t is None else t.float().contiguous()

        int_bias = bias is not None and bias.dtype == torch.int32

        def per_group(t):  # elements between two groups' values: a (G, ...) form's row
            return 0 if groups is None or t is None else t[0].numel()

        launch(_dequant_swiglu_quant, cfg["grid"], rows_of(x, 2 * n), f32(weight_scale),
               f32(activation_scale), bias.contiguous() if int_bias else x,
               x if int_bias else f32(bias), f32(quant_scale),
               x if dynamic else f32(quant_offset), x if groups is None else groups.contiguous(),
               o.bufs[0], o.bufs[1], rows, n,
               cfg["programs"], -float(glu_alpha), float(clamp_limit), float(glu_bias),
               per_group(weight_scale), per_group(bias), per_group(quant_scale),
               0 if dynamic else per_group(quant_offset),
               MODE=int(swiglu_mode), LEFT=bool(activate_left), WS=weight_scale is not None,
               ACT=activation_scale is not None,
               BIAS=0 if bias is None else (1 if int_bias else 2),
               QS=_per_param(quant_scale, n, dynamic),
               QO=0 if dynamic else _per_param(quant_offset, n, False),
               DYNAMIC=dynamic, GROUPS=groups is not None, BLOCK=block,
               num_warps=cfg["num_warps"])
    return o.done()


def _per_param(t, n, dynamic):
    """0 absent, 1 per channel (N values; every dynamic quant_scale), 2 one value (static
    mode's (1,) form)."""
    if t is None:
        return 0
    return 1 if dynamic or t.dim() == 2 else 2


def run_clipped(x, y, pre, rows, alpha, limit, bias, interleaved):
    """npu_clipped_swiglu of ``x`` seen as (pre, 2 * half) into ``y`` (its fake's allocation),
    the first ``rows`` rows computed and the others 0; returns it."""
    o = Outputs(y)
    half = y.numel() // pre if pre else 0
    tiled(_clipped_swiglu, pre, half, x.contiguous(), o.bufs[0], pre, half, rows, -float(alpha),
          float(limit), float(bias), INTERLEAVED=bool(interleaved))
    return o.done()[0]


def _geometry(input, dim):
    """(outer, inner): the slices before ``dim``, and the elements of one half per slice
    (half the size along ``dim`` times the elements after it)."""
    inner = input.shape[dim] // 2
    for s in input.shape[dim + 1:]:
        inner *= s
    outer = 1
    for s in input.shape[:dim]:
        outer *= s
    return outer, inner


def run(input, out, dim):
    """npu_swiglu of ``input`` along ``dim`` (wrapped) into ``out`` (its fake's
    allocation); returns it."""
    o = Outputs(out)
    outer, inner = _geometry(input, dim)
    tiled(_swiglu, outer, inner, input.contiguous(), o.bufs[0], outer, inner)
    return o.done()[0]


def run_backward(grad_output, input, out, dim):
    """npu_swiglu_backward into ``out`` (its fake's allocation); returns it."""
    o = Outputs(out)
    outer, inner = _geometry(input, dim)
    tiled(_swiglu_backward, outer, inner, grad_output.contiguous(), input.contiguous(),
          o.bufs[0], outer, inner)
    return o.done()[0]


def _per(t, grouped=False):
    """0 absent, 1 per channel, 2 one value (a group's: (G,) of G groups)."""
    if t is None:
        return 0
    return 1 if (t.dim() == 2 if grouped else t.numel() > 1) else 2


def run_quant(x, y, scale, n, smooth_scales, offsets, activate_left, dynamic, groups=None):
    """npu_swiglu_quant of ``x`` (rows of 2N) into ``y`` / ``scale`` (the fake's
    allocations): smooth_scales and offsets of N values or one per group (None: not
    applied), ``groups`` each row's group (int64, -1 after the last; None: one group);
    returns (y, scale)."""
    o = Outputs(y, scale)
    rows = x.numel() // (2 * n)
    if rows:
        block = block_for(n)
        cfg = row_launch(rows, 2 * block, x.element_size(), x.device, quant=True)  # both halves
        sm = x if smooth_scales is None else smooth_scales.contiguous()
        of = x if offsets is None else offsets.contiguous()  # a switched-off pointer is never read
        gr = x if groups is None else groups.contiguous()
        launch(_swiglu_quant, cfg["grid"], rows_of(x, 2 * n), sm, of, gr, o.bufs[0], o.bufs[1],
               rows, n, cfg["programs"], LEFT=bool(activate_left),
               SMOOTH=_per(smooth_scales, groups is not None), OFFSET=_per(offsets,
                                                                          groups is not None),
               DYNAMIC=bool(dynamic), GROUPS=groups is not None, BLOCK=block,
               num_warps=cfg["num_warps"])
    return o.done()
