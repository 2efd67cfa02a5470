"""The ``op_sdk.npu`` custom domain, and the calls behind the nodes ``op-sdk fuse`` writes.

Every ``op_sdk.npu`` node comes with a model-local function of the same domain, name and
overload (``FunctionProto``) whose body is the standard-ONNX composite of the node's
semantics: onnxruntime (and any runtime that implements ONNX functions) inlines it, an NPU
toolchain maps the node to its fused kernel. Each node type has one definition, a
:class:`~op_sdk.onnx.translation.Call` (inputs, attributes, overload, composite):

* an op_sdk operator's node (``DynamicQuant``, ...) is its slice's translation
  (``op_sdk/onnx/<slice>.py``): the export and the fusion write the same node, overloads and
  function;
* the groups with no op_sdk operator of their own, ``SiluMul`` (``silu(gate) * up``) and
  ``SiluMulQuant`` (``SiluMul`` then ``DynamicQuant``'s per-token int8 composite: the
  worked example's ``my_ops::silu_mul_quant``, whose export writes it), are defined
  here from the same pieces.
"""

from __future__ import annotations

__all__ = ["DOMAIN", "DOMAIN_VERSION", "MIN_OPSET", "FUSED", "fused_call"]

from op_sdk.onnx.translation import (
    DOMAIN, DOMAIN_VERSION, Call, dt, dtype_tag, dynamic_int8, silu_mul, translations)

# the composites' opset floor: Squeeze takes its axes as an input from opset 13 on
MIN_OPSET = 13

# node type -> (formal inputs, outputs) of the groups with no op_sdk operator; an op_sdk
# operator's node (DynamicQuant) is named after its Ascend IR prototype (converters/<slice>.py)
FUSED = {
    "SiluMul": (["gate", "up"], ["y"]),
    "SiluMulQuant": (["gate", "up"], ["y", "scale"]),
}


def fused_call(op: str, *values):
    """The Call of node type ``op`` on typed values (onnx_ir Values: dtype, and shape or
    None): the node's inputs, attributes, overload key and composite."""
    if op == "DynamicQuant":
        custom, _ = translations()
        return custom[("npu_dynamic_quant", "default")](*values)
    gate, up = values
    if op == "SiluMul":
        return Call("SiluMul", [gate, up], {}, "", lambda b, g, u: (silu_mul(b, g, u),), 1)
    if op == "SiluMulQuant":
        key = dtype_tag(dt(gate))
        return Call("SiluMulQuant", [gate, up], {}, key,
                    lambda b, g, u: dynamic_int8(b, silu_mul(b, b.to_float(g), b.to_float(u)), None), 2)
    raise ValueError(f"op_sdk.onnx: no fused node {DOMAIN}.{op}; known: {sorted(['DynamicQuant', *FUSED])}")
