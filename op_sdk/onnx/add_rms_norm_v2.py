"""npu_add_rms_norm_v2_functional -> op_sdk.npu.AddRmsNorm (ONNX export), as TorchAir
converts it: npu_add_rms_norm's node and composite, the outputs reordered to (rstd, y, x).
The in-place npu_add_rms_norm_v2 reaches the export functionalized, as this twin."""

from __future__ import annotations

from op_sdk.onnx.add_rms_norm import _add_rms_norm
from op_sdk.onnx.translation import Call, dt, dtype_tag, overload_key, proto_inputs, translates


@translates("npu_add_rms_norm_v2_functional")
def _add_rms_norm_v2_functional_call(x1, x2, gamma, epsilon=1e-6):
    ins = proto_inputs("AddRmsNorm", {"x1": x1, "x2": x2, "gamma": gamma})
    key = overload_key(dtype_tag(dt(x1)), f"g{len(gamma.shape)}", f"eps{epsilon!r}")
    return Call("AddRmsNorm", ins, {"epsilon": float(epsilon)}, key,
                lambda b, a, c, g: _add_rms_norm(b, a, c, g, epsilon), 3, order=(1, 0, 2))
