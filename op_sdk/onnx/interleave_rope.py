"""npu_interleave_rope -> op_sdk.npu.InterleaveRope (ONNX export): the custom node (CANN's
inputs x, cos, sin) and the standard-ONNX composite that computes it, npu_rotary_mul's
"interleave-half" composite (onnx/rotary_mul.py). The last dim must be static (it is 64)."""

from __future__ import annotations

from op_sdk.onnx.rotary_mul import _forward, _static
from op_sdk.onnx.translation import Call, dt, dtype_tag, overload_key, proto_inputs, translates
from op_sdk.ops.interleave_rope import D, MODE


@translates("npu_interleave_rope")
def _interleave_rope_call(x, cos, sin):
    _static(x, "x", "npu_interleave_rope")
    ins = proto_inputs("InterleaveRope", {"x": x, "cos": cos, "sin": sin})
    return Call("InterleaveRope", ins, {}, overload_key(dtype_tag(dt(x))),
                lambda b, x_, c, s: _forward(b, x_, c, s, None, MODE, D), 1)
