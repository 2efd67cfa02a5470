"""npu_dynamic_quant and npu_quantize.

Native CPU kernels: csrc/quant.cpp (over kernels/quant.h).
"""

from __future__ import annotations

import torch

from op_sdk.library import define_op
from op_sdk.ops._common import (
    FLOAT_DTYPES,
    INT4_MAX,
    INT8_MAX,
    check,
    check_1d,
    check_dtype,
    dtype_arg,
    pack_int4,
    quantize_round,
)

QUANT_MODES = ("pertoken", "pertensor", "perchannel")
INT8, QINT8, UINT8, QUINT8, INT32, QINT32, QUINT4X2 = 1, 12, 0, 13, 3, 14, 16
MAX_GROUPS = 1024


# ---- npu_dynamic_quant -------------------------------------------------------------------

def check_dynamic_quant(input, smooth_scales, group_index, dst_type, quant_mode, dst_type_max):
    """Shape / dtype rules (everything the fake function can see). Returns dst code."""
    op = "npu_dynamic_quant"
    check_dtype(input, op, "input", FLOAT_DTYPES)
    check(input.dim() > 1, op, "input", f"must have more than 1 dim, got {input.dim()}")
    code = dtype_arg(op, "dst_type", dst_type, (INT8, QUINT4X2), INT8)
    check(quant_mode in QUANT_MODES, op, "quant_mode",
          f"must be one of {', '.join(QUANT_MODES)}, got {quant_mode!r}")
    check(dst_type_max == 0.0, op, "dst_type_max",
          f"must be 0.0 for int8 / int4 outputs (the range is implied), got {dst_type_max}")
    h = input.shape[-1]
    if code == QUINT4X2:
        check(h % 8 == 0, op, "input",
              f"last dim must be a multiple of 8 for int4 (quint4x2) output, got {h}")
    if smooth_scales is not None:
        check_dtype(smooth_scales, op, "smooth_scales", FLOAT_DTYPES)
    if group_index is not None:
        check(quant_mode == "pertoken", op, "group_index",
              f"requires quant_mode 'pertoken', got {quant_mode!r}")
        check(group_index.dtype == torch.int32, op, "group_index",
              f"must have dtype int32, got {group_index.dtype}")
        check(group_index.dim() == 1 and 1 <= group_index.shape[0] <= MAX_GROUPS, op,
              "group_index", f"must be 1-D with 1 to {MAX_GROUPS} groups, got shape "
              f"{list(group_index.shape)}")
        check(smooth_scales is not None, op, "smooth_scales", "is required with group_index")
        check(smooth_scales.dim() == 2 and smooth_scales.shape[0] == group_index.shape[0]
              and smooth_scales.shape[1] == h, op, "smooth_scales",
              f"must have shape (E, H) = ({group_index.shape[0]}, {h}) with group_index, "
              f"got {list(smooth_scales.shape)}")
    elif smooth_scales is not None and quant_mode == "perchannel":
        # per channel (aclnnDynamicQuantV3): one smoothing factor per row of dim -2
        check(smooth_scales.dim() == 1 and smooth_scales.shape[0] == input.shape[-2], op,
              "smooth_scales", f"must be 1-D of length input.size(-2) = {input.shape[-2]} "
              f"with quant_mode 'perchannel', got shape {list(smooth_scales.shape)}")
    elif smooth_scales is not None:
        check_1d(smooth_scales, op, "smooth_scales", h)
    return code


def check_group_index_values(op: str, group_index: torch.Tensor, rows: int) -> None:
    """Data rules of MoE group_index: cumulative end rows, non-decreasing, last == rows."""
    g = group_index.to(torch.int64)
    check(bool((g >= 0).all()), op, "group_index", "must have no negative values")
    check(bool((g[1:] >= g[:-1]).all()), op, "group_index", "must be non-decreasing")
    check(int(g[-1]) == rows, op, "group_index",
          f"last value must equal the number of rows {rows}, got {int(g[-1])}")


def _dynamic_quant_shapes(input, quant_mode, code):
    y_shape = list(input.shape)
    if code == QUINT4X2:
        y_shape[-1] //= 8
    if quant_mode == "pertoken":
        s_shape = list(input.shape[:-1])
    elif quant_mode == "pertensor":
        s_shape = [1]
    else:
        s_shape = list(input.shape[:-2]) + [input.shape[-1]]
    return y_shape, s_shape


def dynamic_quant_reference(input, *, smooth_scales=None, group_index=None, dst_type=None,
                            quant_mode="pertoken", dst_type_max=0.0):
    code = check_dynamic_quant(input, smooth_scales, group_index, dst_type, quant_mode,
                               dst_type_max)
    h = input.shape[-1]
    s = input.float()
    if group_index is not None:
        rows = s.reshape(-1, h)
        check_group_index_values("npu_dynamic_quant", group_index, rows.shape[0])
        counts = torch.diff(group_index.to(torch.int64),
                            prepend=group_index.new_zeros(1, dtype=torch.int64))
        group_of_row = torch.repeat_interleave(
            torch.arange(group_index.shape[0], device=input.device), counts)
        s = (rows * smooth_scales.float()[group_of_row]).reshape(input.shape)
    elif smooth_scales is not None and quant_mode == "perchannel":
        s = s * smooth_scales.float().unsqueeze(-1)
    elif smooth_scales is not None:
        s = s * smooth_scales.float()
    dmax = INT4_MAX if code == QUINT4X2 else INT8_MAX
    if quant_mode == "pertoken":
        amax = s.abs().amax(-1, keepdim=True)
    elif quant_mode == "pertensor":
        amax = s.abs().amax().reshape([1] * s.dim())
    else:
        amax = s.abs().amax(-2, keepdim=True)
    # All-zero rows: scale 0 and y 0 (the contract's choice), never NaN.
    # one fp32 division dmax / amax (a Python scalar / tensor is reciprocal(amax) * dmax,
    # which can differ in the last bit)
    inv = torch.where(amax > 0, torch.full_like(amax, dmax) / amax, torch.zeros_like(amax))
    q = quantize_round(s * inv, -dmax - 1, dmax, torch.int8)
    scale = amax / dmax
    _, s_shape = _dynamic_quant_shapes(input, quant_mode, code)
    y = pack_int4(q) if code == QUINT4X2 else q
    return y, scale.reshape(s_shape)


def dynamic_quant_fake(input, *, smooth_scales=None, group_index=None, dst_type=None,
                       quant_mode="pertoken", dst_type_max=0.0):
    code = check_dynamic_quant(input, smooth_scales, group_index, dst_type, quant_mode,
                               dst_type_max)
    y_shape, s_shape = _dynamic_quant_shapes(input, quant_mode, code)
    ydt = torch.int32 if code == QUINT4X2 else torch.int8
    return input.new_empty(y_shape, dtype=ydt), input.new_empty(s_shape, dtype=torch.float32)


npu_dynamic_quant = define_op(
    "npu_dynamic_quant(Tensor input, *, Tensor? smooth_scales=None, Tensor? group_index=None, "
    "int? dst_type=None, str quant_mode=\"pertoken\", float dst_type_max=0.0) -> (Tensor, Tensor)",
    reference=dynamic_quant_reference, fake=dynamic_quant_fake, native=("cpu",),
    doc="Symmetric dynamic quantisation per token (or tensor / channel) to int8 or int4.",
)


# ---- npu_quantize ------------------------------------------------------------------------

_QUANTIZE_OUT = {
    INT8: torch.int8, QINT8: torch.int8, UINT8: torch.uint8, QUINT8: torch.uint8,
    INT32: torch.int32, QINT32: torch.int32, QUINT4X2: torch.int32,
}
_RANGES = {torch.int8: (-128.0, 127.0), torch.uint8: (0.0, 255.0),
           torch.int32: (-2.0**31, 2.0**31 - 1)}


def check_quantize(input, scales, zero_points, dtype, axis, div_mode):
    """Returns (dtype code, the honoured axis as a non-negative dim)."""
    op = "npu_quantize"
    check_dtype(input, op, "input", FLOAT_DTYPES)
    check(input.dim() >= 1, op, "input", "must have at least 1 dim")
    code = dtype_arg(op, "dtype", dtype, tuple(_QUANTIZE_OUT), None)
    if div_mode:
        check(-input.dim() <= axis < input.dim(), op, "axis",
              f"must be in [{-input.dim()}, {input.dim() - 1}], got {axis}")
        ax = axis % input.dim()
        check(code != QUINT4X2, op, "dtype", "quint4x2 (int4 packed in int32) requires "
              "div_mode=False")
    else:
        # div_mode=False (AscendQuantV3) quantises along one of the last two axes: axis -2
        # is honoured, any axis >= -1 (the default 1 too) means the last axis
        check(axis >= -2, op, "axis", f"must be -2 or >= -1 (the last axis) when "
              f"div_mode=False, got {axis}")
        check(axis != -2 or input.dim() >= 2, op, "axis",
              f"-2 needs an input of at least 2 dims, got {input.dim()}")
        ax = input.dim() - 2 if axis == -2 else input.dim() - 1
        check(scales.dtype == input.dtype, op, "scales",
              f"must have the dtype of 'input' ({input.dtype}) when div_mode=False, got "
              f"{scales.dtype}")
        if zero_points is not None:
            check(zero_points.dtype == input.dtype, op, "zero_points",
                  f"must have the dtype of 'input' ({input.dtype}) when div_mode=False, got "
                  f"{zero_points.dtype}")
    if code == QUINT4X2:
        check(input.shape[-1] % 8 == 0, op, "input",
              f"last dim must be a multiple of 8 for quint4x2 output, got {input.shape[-1]}")
    check_dtype(scales, op, "scales", FLOAT_DTYPES)
    _check_quant_param(op, "scales", scales, input, ax, div_mode)
    if zero_points is not None:
        check(zero_points.dtype != torch.bool and not zero_points.is_complex(), op,
              "zero_points", f"must be numeric, got {zero_points.dtype}")
        _check_quant_param(op, "zero_points", zero_points, input, ax, div_mode)
        if not div_mode:
            check(zero_points.shape == scales.shape, op, "zero_points",
                  f"must have the shape of 'scales' {list(scales.shape)} when div_mode=False, "
                  f"got {list(zero_points.shape)}")
    return code, ax


def _check_quant_param(op, name, t, input, ax, div_mode):
    """1-D of size 1 or input.size(ax); with div_mode=False also input's rank with every dim
    1 but ``ax`` (per-head scales of (B, S, H, D) along axis -2: (1, 1, H, 1))."""
    n = input.shape[ax]
    if t.dim() == 1:
        check(t.shape[0] in (1, n), op, name,
              f"must be 1-D of size 1 or input.size({ax}) = {n}, got {list(t.shape)}")
        return
    want = [1] * input.dim()
    want[ax] = n
    check(not div_mode and t.dim() == input.dim()
          and all(d == 1 for i, d in enumerate(t.shape) if i != ax) and t.shape[ax] in (1, n),
          op, name, f"must be 1-D of size 1 or {n}" + ("" if div_mode else
                    f", or of shape {want} (div_mode=False)") + f", got {list(t.shape)}")


def quantize_reference(input, scales, zero_points, dtype, axis=1, div_mode=True):
    code, ax = check_quantize(input, scales, zero_points, dtype, axis, div_mode)
    bshape = [1] * input.dim()
    bshape[ax] = -1
    x = input.float()
    s = scales.float().reshape(bshape)
    v = x / s if div_mode else x * s
    if zero_points is not None:
        v = v + zero_points.float().reshape(bshape)  # the same values, per-axis broadcast
    if code == QUINT4X2:
        return pack_int4(quantize_round(v, -8.0, 7.0, torch.int8))
    out = _QUANTIZE_OUT[code]
    lo, hi = _RANGES[out]
    # rounded in fp32, saturated in fp64 (int32's max is not an fp32 value)
    return torch.round(v).double().clamp_(lo, hi).to(out)


def quantize_fake(input, scales, zero_points, dtype, axis=1, div_mode=True):
    code, _ = check_quantize(input, scales, zero_points, dtype, axis, div_mode)
    shape = list(input.shape)
    if code == QUINT4X2:
        shape[-1] //= 8
    return input.new_empty(shape, dtype=_QUANTIZE_OUT[code])


npu_quantize = define_op(
    "npu_quantize(Tensor input, Tensor scales, Tensor? zero_points, int dtype, int axis=1, "
    "bool div_mode=True) -> Tensor",
    reference=quantize_reference, fake=quantize_fake, native=("cpu",),
    doc="Static quantisation rint(x / scales + zp) (div_mode) or rint(x * scales + zp).",
)

__all__ = ["npu_dynamic_quant", "npu_quantize"]
