"""op_sdk::rms_norm_rope -> op_sdk.npu.RmsNormRope (ONNX export): the custom node, and the
standard-ONNX composite that computes it: npu_rms_norm's composite (rounded to x's dtype),
then npu_rotary_mul's "half" composite on that (float32 inside, one rounding). The last dim
must be static."""

from __future__ import annotations

from op_sdk.onnx.rms_norm import _rms_norm
from op_sdk.onnx.rotary_mul import _forward, _static
from op_sdk.onnx.translation import Call, dt, dtype_tag, overload_key, proto_inputs, translates


def _rms_norm_rope(b, x, gamma, cos, sin, epsilon, d):
    y, _ = _rms_norm(b, x, gamma, epsilon)
    return _forward(b, y, cos, sin, None, "half", d, x.dtype)


@translates("rms_norm_rope", namespace="op_sdk")
def _rms_norm_rope_call(x, gamma, cos, sin, epsilon=1e-06):
    d = _static(x, "x", "rms_norm_rope")[-1]
    ins = proto_inputs("RmsNormRope", {"x": x, "gamma": gamma, "cos": cos, "sin": sin})
    key = overload_key(dtype_tag(dt(x)), dtype_tag(dt(gamma)), dtype_tag(dt(cos)), f"d{d}",
                       f"eps{epsilon!r}")
    return Call("RmsNormRope", ins, {"epsilon": float(epsilon)}, key,
                lambda b, x, g, c, s: _rms_norm_rope(b, x, g, c, s, epsilon, d), 1)
