"""my_ops::silu_mul_quant -> op_sdk.npu.SiluMulQuant (ONNX export): the node ``op-sdk fuse``
writes for silu(gate) * up followed by a dynamic quantisation, and its standard-ONNX composite,
both from their one definition (op_sdk.onnx.functions)."""

from __future__ import annotations

from op_sdk.onnx.functions import fused_call
from op_sdk.onnx.translation import translates


@translates("silu_mul_quant", namespace="my_ops")
def _silu_mul_quant_call(gate, up):
    return fused_call("SiluMulQuant", gate, up)
