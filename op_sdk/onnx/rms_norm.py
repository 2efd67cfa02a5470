"""npu_rms_norm -> op_sdk.npu.RmsNorm (ONNX export)."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, dt, dtype_tag, normalize, overload_key, proto_inputs, translates)


def _rms_norm(b, x, gamma, epsilon):
    y, rstd = normalize(b, b.to_float(x), gamma, epsilon)
    return b.cast(y, x.dtype), rstd


@translates("npu_rms_norm")
def _rms_norm_call(input, gamma, epsilon=1e-6):
    ins = proto_inputs("RmsNorm", {"x": input, "gamma": gamma})
    key = overload_key(dtype_tag(dt(input)), dtype_tag(dt(gamma)), f"g{len(gamma.shape)}",
                       f"eps{epsilon!r}")
    return Call("RmsNorm", ins, {"epsilon": float(epsilon)}, key,
                lambda b, x, g: _rms_norm(b, x, g, epsilon), 2)
