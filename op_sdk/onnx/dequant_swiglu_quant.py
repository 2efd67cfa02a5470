"""npu_dequant_swiglu_quant -> op_sdk.npu.DequantSwigluQuant (ONNX export), without
group_index: the custom node (CANN's inputs; the IR's attributes) and the standard-ONNX
composite that computes it, the reference's steps in float32: an int32 bias added in int32,
the cast, times weight_scale and the rows' activation_scale, plus a float bias; the halves (or
the even / odd columns) through SwiGLU or the clipped SwiGLU; then dynamic int8 (times
quant_scale; scale = amax / 127) or static int8 (/ quant_scale + quant_offset; scale 0)."""

from __future__ import annotations

from op_sdk.onnx.clipped_swiglu import clipped_glu
from op_sdk.onnx.rotary_mul import _static
from op_sdk.onnx.translation import (
    Call, dt, dtype_tag, dynamic_int8, ge_int8, overload_key, proto_inputs, silu_mul,
    static_int8, translates, unsupported)
from op_sdk.ops.dequant_swiglu_quant import OP, QUANT_MODES


@translates(OP)
def _dequant_swiglu_quant_call(x, *, weight_scale=None, activation_scale=None, bias=None,
                               quant_scale=None, quant_offset=None, group_index=None,
                               activate_left=False, quant_mode=0, dst_type=None,
                               round_mode=None, activate_dim=None, swiglu_mode=0,
                               clamp_limit=7.0, glu_alpha=1.702, glu_bias=1.0):
    if group_index is not None:
        unsupported(OP, "group_index", "must be None for ONNX export (MoE groups have no ONNX "
                    "composite here)")
    dims = _static(x, "x", OP)
    rows_shape = dims[:-1] + [1]
    n = dims[-1] // 2
    dynamic = quant_mode == 1
    quant_offset = None if dynamic else quant_offset  # read in static mode only
    int_bias = bias is not None and dt(bias).name == "INT32"
    named = {"x": x, "weight_scale": weight_scale, "activation_scale": activation_scale,
             "bias": bias, "quant_scale": quant_scale, "quant_offset": quant_offset}
    ins = proto_inputs("DequantSwigluQuant", named)
    attrs = {"activate_left": bool(activate_left), "quant_mode": QUANT_MODES[quant_mode],
             "dst_type": ge_int8(), "round_mode": "rint", "activate_dim": -1,
             "swiglu_mode": int(swiglu_mode), "clamp_limit": float(clamp_limit),
             "glu_alpha": float(glu_alpha), "glu_bias": float(glu_bias)}
    key = overload_key(dtype_tag(dt(x)), *(f"{k}{v!r}" for k, v in attrs.items()),
                       *(f"{k}{'x'.join(map(str, v.shape))}{dtype_tag(dt(v))}"
                         for k, v in named.items() if v is not None and k != "x"))

    def composite(b, x_, ws=None, act=None, bias_=None, qs=None, qo=None):
        v = b("Add", x_, bias_) if int_bias else x_  # int32 + int32
        v = b.to_float(v)
        if ws is not None:
            v = b("Mul", v, ws)  # (2H,) / (1, 2H): broadcast over the rows
        if act is not None:
            v = b("Mul", v, b("Reshape", act, b.i64(rows_shape)))
        if bias_ is not None and not int_bias:
            v = b("Add", v, b.to_float(bias_))
        last = len(dims) - 1
        if swiglu_mode == 1:
            a = b("Slice", v, b.i64([0]), b.i64([2 * n]), b.i64([last]), b.i64([2]))
            h = b("Slice", v, b.i64([1]), b.i64([2 * n]), b.i64([last]), b.i64([2]))
        else:
            first = b("Slice", v, b.i64([0]), b.i64([n]), b.i64([last]))
            second = b("Slice", v, b.i64([n]), b.i64([2 * n]), b.i64([last]))
            a, h = (first, second) if activate_left else (second, first)
        t = silu_mul(b, a, h) if swiglu_mode == 0 else clipped_glu(b, a, h, glu_alpha,
                                                                  clamp_limit, glu_bias)
        if dynamic:
            return dynamic_int8(b, t, qs)
        import numpy as np

        y = static_int8(b, t, qs, qo, div_mode=True)
        scale = b("ConstantOfShape", b("Shape", x_, start=0, end=-1),
                  value=b.ir.tensor(np.zeros((1,), "float32")))
        return y, scale
    return Call("DequantSwigluQuant", ins, attrs, key, composite, 2)
