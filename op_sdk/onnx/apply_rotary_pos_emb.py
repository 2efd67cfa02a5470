"""npu_apply_rotary_pos_emb -> op_sdk.npu.ApplyRotaryPosEmb (ONNX export): the custom node
(CANN's inputs query, key, cos, sin; attributes layout, rotary_mode) and the standard-ONNX
composite that computes it, npu_rotary_mul's composite (onnx/rotary_mul.py) on query and on
key. The last dim must be static."""

from __future__ import annotations

from op_sdk.onnx.rotary_mul import _forward, _static
from op_sdk.onnx.translation import Call, dt, dtype_tag, overload_key, proto_inputs, translates
from op_sdk.ops.apply_rotary_pos_emb import LAYOUTS


def _both(b, q, k, c, s, mode, d):
    return _forward(b, q, c, s, None, mode, d) + _forward(b, k, c, s, None, mode, d)


@translates("npu_apply_rotary_pos_emb")
def _apply_rotary_pos_emb_call(query, key, cos, sin, layout="BSND", rotary_mode="half"):
    d = _static(query, "query", "npu_apply_rotary_pos_emb")[-1]
    ins = proto_inputs("ApplyRotaryPosEmb", {"query": query, "key": key, "cos": cos, "sin": sin})
    attrs = {"layout": LAYOUTS[layout][0], "rotary_mode": rotary_mode}
    key_ = overload_key(dtype_tag(dt(query)), LAYOUTS[layout][0], rotary_mode, f"d{d}")
    return Call("ApplyRotaryPosEmb", ins, attrs, key_,
                lambda b, q, k, c, s: _both(b, q, k, c, s, rotary_mode, d), 2)
