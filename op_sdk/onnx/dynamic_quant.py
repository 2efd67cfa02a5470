"""npu_dynamic_quant -> op_sdk.npu.DynamicQuant (ONNX export): per token, int8."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, INT8, dt, dtype_tag, dynamic_int8, ge_int8, overload_key, proto_inputs,
    translates, unsupported)


@translates("npu_dynamic_quant")
def _dynamic_quant_call(input, *, smooth_scales=None, group_index=None, dst_type=None,
                        quant_mode="pertoken", dst_type_max=0.0):
    op = "npu_dynamic_quant"
    if dst_type not in (None, INT8):
        unsupported(op, "dst_type", f"must be None or torch.int8 (1), got {dst_type}")
    if quant_mode != "pertoken":
        unsupported(op, "quant_mode", f"must be 'pertoken', got {quant_mode!r}")
    if group_index is not None:
        unsupported(op, "group_index", "must be None")
    ins = proto_inputs("DynamicQuant", {"x": input, "smooth_scales": smooth_scales})
    key = overload_key(dtype_tag(dt(input)),
                       "smooth_" + dtype_tag(dt(smooth_scales)) if smooth_scales is not None
                       else "nosmooth")

    def composite(b, x, smooth=None):
        return dynamic_int8(b, b.to_float(x), smooth)
    return Call("DynamicQuant", ins, {"dst_type": ge_int8()}, key, composite, 2)
