"""npu_add_rms_norm_cast -> op_sdk.npu.AddRmsNormCast (ONNX export)."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, dt, dtype_tag, normalize, overload_key, proto_inputs, translates)


@translates("npu_add_rms_norm_cast")
def _add_rms_norm_cast_call(x1, x2, gamma, epsilon=1e-6):
    ins = proto_inputs("AddRmsNormCast", {"x1": x1, "x2": x2, "gamma": gamma})
    key = overload_key(dtype_tag(dt(x1)), f"g{len(gamma.shape)}", f"eps{epsilon!r}")

    def composite(b, a, c, g):
        x = b("Add", b.to_float(a), b.to_float(c))
        y, rstd = normalize(b, x, g, epsilon)
        return b("Identity", y), b.cast(y, a.dtype), rstd, b.cast(x, a.dtype)
    return Call("AddRmsNormCast", ins, {"epsilon": float(epsilon)}, key, composite, 4)
