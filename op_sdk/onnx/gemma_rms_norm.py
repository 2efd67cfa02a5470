"""npu_gemma_rms_norm -> op_sdk.npu.GemmaRmsNorm (ONNX export): the custom node (CANN's inputs
x, gamma) and its standard-ONNX composite, npu_rms_norm's with the weight 1 + gamma."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, dt, dtype_tag, normalize, overload_key, proto_inputs, translates)


def _gemma_rms_norm(b, x, gamma, epsilon):
    y, rstd = normalize(b, b.to_float(x), gamma, epsilon, plus_one=True)
    return b.cast(y, x.dtype), rstd


@translates("npu_gemma_rms_norm")
def _gemma_rms_norm_call(input, gamma, epsilon=1e-6):
    ins = proto_inputs("GemmaRmsNorm", {"x": input, "gamma": gamma})
    key = overload_key(dtype_tag(dt(input)), f"g{len(gamma.shape)}", f"eps{epsilon!r}")
    return Call("GemmaRmsNorm", ins, {"epsilon": float(epsilon)}, key,
                lambda b, x, g: _gemma_rms_norm(b, x, g, epsilon), 2)
