"""npu_swiglu_quant -> op_sdk.npu.SwiGluQuant (ONNX export), without group_index: the custom
node (CANN's inputs x, smooth_scales, offsets; attributes activate_left, quant_mode as the
IR's string, group_list_type, dst_type) and the standard-ONNX composite that computes it in
float32: SwiGLU of the halves, times smooth_scales, then per-row dynamic int8 (scale =
127 / amax, y 0 on an all-zero row) or static int8 (plus offsets; scale 0)."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, dt, dtype_tag, ge_int8, overload_key, proto_inputs, silu_mul, translates,
    unsupported)
from op_sdk.ops.swiglu_quant import QUANT_MODES


@translates("npu_swiglu_quant")
def _swiglu_quant_call(x, *, smooth_scales=None, offsets=None, group_index=None,
                       activate_left=False, quant_mode=0, group_list_type=0, dst_type=None):
    if group_index is not None:
        unsupported("npu_swiglu_quant", "group_index", "must be None for ONNX export (MoE "
                    "groups have no ONNX composite here)")
    dynamic = quant_mode == 1
    offsets = None if dynamic else offsets  # read in static mode only
    ins = proto_inputs("SwiGluQuant", {"x": x, "smooth_scales": smooth_scales,
                                       "offsets": offsets})
    key = overload_key(dtype_tag(dt(x)), f"left{int(bool(activate_left))}",
                       QUANT_MODES[quant_mode],
                       "smooth" + "x".join(str(s) for s in smooth_scales.shape)
                       if smooth_scales is not None else "nosmooth",
                       "offsets" if offsets is not None else "nooffsets")
    attrs = {"activate_left": bool(activate_left), "quant_mode": QUANT_MODES[quant_mode],
             "group_list_type": int(group_list_type), "dst_type": ge_int8()}

    def composite(b, x_, smooth=None, offs=None):
        import numpy as np

        ir = b.ir
        if b.opset is not None and b.opset < 18:
            a, h = b("Split", b.to_float(x_), _n=2, axis=-1)
        else:
            a, h = b("Split", b.to_float(x_), _n=2, axis=-1, num_outputs=2)
        t = silu_mul(b, a, h) if activate_left else silu_mul(b, h, a)
        if smooth is not None:
            t = b("Mul", t, smooth)  # (1, N) or (1,): broadcast over the rows
        if dynamic:
            amax = b.reduce("ReduceMax", b("Abs", t), [-1])
            mult = b("Div", b.f32(127.0), amax)  # inf on an all-zero row
            v = b("Mul", t, b("Where", b("Greater", amax, b.f32(0.0)), mult, b.f32(0.0)))
            scale = b("Squeeze", mult, b.i64([-1]))
        else:
            v = t if offs is None else b("Add", t, offs)
            scale = b("ConstantOfShape", b("Shape", x_, start=0, end=-1),
                      value=ir.tensor(np.zeros((1,), "float32")))
        q = b("Clip", b("Round", v), b.f32(-128.0), b.f32(127.0))
        return b("Cast", q, to=int(ir.DataType.INT8)), scale
    return Call("SwiGluQuant", ins, attrs, key, composite, 2)
