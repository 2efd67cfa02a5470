"""npu_add_rms_norm -> op_sdk.npu.AddRmsNorm (ONNX export)."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, dt, dtype_tag, normalize, overload_key, proto_inputs, translates)


def _add_rms_norm(b, x1, x2, gamma, epsilon):
    x = b("Add", b.to_float(x1), b.to_float(x2))
    y, rstd = normalize(b, x, gamma, epsilon)
    return b.cast(y, x1.dtype), rstd, b.cast(x, x1.dtype)


@translates("npu_add_rms_norm")
def _add_rms_norm_call(x1, x2, gamma, epsilon=1e-6):
    ins = proto_inputs("AddRmsNorm", {"x1": x1, "x2": x2, "gamma": gamma})
    key = overload_key(dtype_tag(dt(x1)), f"g{len(gamma.shape)}", f"eps{epsilon!r}")
    return Call("AddRmsNorm", ins, {"epsilon": float(epsilon)}, key,
                lambda b, a, c, g: _add_rms_norm(b, a, c, g, epsilon), 3)
