"""npu_clipped_swiglu -> op_sdk.npu.ClippedSwiglu (ONNX export): the custom node (CANN's
inputs x, group_index; its attributes) and the standard-ONNX composite that computes it, the
reference's steps: x as [pre, n] (static shapes), A / B its even and odd columns (Slice with
step 2) or its halves, min(A, limit), clamp(B) + bias, B * (A / (exp(A * -alpha) + 1)) in
float32, the rows from sum(group_index) on set to 0, one rounding to x's dtype."""

from __future__ import annotations

import math

from op_sdk.onnx.rotary_mul import _static
from op_sdk.onnx.translation import Call, dt, dtype_tag, overload_key, proto_inputs, translates

OP = "npu_clipped_swiglu"


def clipped_glu(b, a, h, alpha, limit, bias):
    """The clipped SwiGLU of float32 a, h (ops/clipped_swiglu.py clipped_glu): min(a, limit),
    clamp(h) + bias, h * (a / (exp(a * -alpha) + 1)); npu_dequant_swiglu_quant's modes 1 / 2
    too."""
    a = b("Min", a, b.f32(limit))
    h = b("Add", b("Max", b("Min", h, b.f32(limit)), b.f32(-limit)), b.f32(bias))
    return b("Mul", h, b("Div", a, b("Add", b("Exp", b("Mul", a, b.f32(-alpha))), b.f32(1.0))))


def _clipped(b, x, g, dims, d, alpha, limit, bias, interleaved):
    pre, n = math.prod(dims[:d]), math.prod(dims[d:])
    v = b("Reshape", b.to_float(x), b.i64([pre, n]))
    if interleaved:
        a = b("Slice", v, b.i64([0]), b.i64([n]), b.i64([1]), b.i64([2]))
        h = b("Slice", v, b.i64([1]), b.i64([n]), b.i64([1]), b.i64([2]))
    else:
        a = b("Slice", v, b.i64([0]), b.i64([n // 2]), b.i64([1]))
        h = b("Slice", v, b.i64([n // 2]), b.i64([n]), b.i64([1]))
    y = clipped_glu(b, a, h, alpha, limit, bias)
    if g is not None:  # rows < min(sum(group_index), pre)
        rows = b("Min", b("ReduceSum", g, keepdims=0), b.i64(pre))
        live = b("Less", b("Unsqueeze", b("Range", b.i64(0), b.i64(pre), b.i64(1)), b.i64([1])),
                 rows)
        y = b("Where", live, y, b.f32(0.0))
    out = list(dims)
    out[d] //= 2
    return (b("Reshape", b.cast(y, x.dtype), b.i64(out)),)


@translates(OP)
def _clipped_swiglu_call(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                         interleaved=True):
    dims = _static(x, "x", OP)
    d = dim % len(dims)
    ins = proto_inputs("ClippedSwiglu", {"x": x, "group_index": group_index})
    attrs = {"dim": int(dim), "alpha": float(alpha), "limit": float(limit), "bias": float(bias),
             "interleaved": bool(interleaved)}
    key = overload_key(dtype_tag(dt(x)), *(f"{k}{v!r}" for k, v in attrs.items()),
                       "g" if group_index is not None else "")
    if group_index is None:
        return Call("ClippedSwiglu", ins, attrs, key,
                    lambda b, x_: _clipped(b, x_, None, dims, d, alpha, limit, bias, interleaved), 1)
    return Call("ClippedSwiglu", ins, attrs, key,
                lambda b, x_, g: _clipped(b, x_, g, dims, d, alpha, limit, bias, interleaved), 1)
