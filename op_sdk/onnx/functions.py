"""The model-local ONNX functions behind op_sdk's custom-domain nodes.

A fused group with no standard ONNX operator (SwiGLU, per-token dynamic int8
quantisation, both together) becomes one node in the ``op_sdk.npu`` domain
(``SiluMul``, ``DynamicQuant``, ``SiluMulQuant``). The model carries, in
``model.functions``, a FunctionProto of the same domain and name whose body is the
standard-operator composite the group was made of: onnxruntime (and any runtime that
implements ONNX functions) inlines it, so the model runs everywhere, while an NPU
toolchain maps the node to its fused kernel. The functions take no attributes; they are
polymorphic in the float type (constants are ``CastLike`` the input), so they need
opset >= 15 (``CastLike``), and the ``ReduceMax`` axes are an input from opset 18 on.
"""

from __future__ import annotations

__all__ = ["DOMAIN", "DOMAIN_VERSION", "FUNCTIONS", "MIN_OPSET", "make_function"]

DOMAIN = "op_sdk.npu"  # the custom domain of op_sdk's nodes, written by export and fuse
DOMAIN_VERSION = 1
MIN_OPSET = 15  # CastLike

# name -> (inputs, outputs)
FUNCTIONS = {
    "SiluMul": (["gate", "up"], ["y"]),
    "DynamicQuant": (["x"], ["y", "scale"]),
    "SiluMulQuant": (["gate", "up"], ["y", "scale"]),
}


def _silu_mul(helper, gate: str, up: str, out: str) -> list:
    return [helper.make_node("Sigmoid", [gate], ["sig"]),
            helper.make_node("Mul", [gate, "sig"], ["silu"]),
            helper.make_node("Mul", ["silu", up], [out])]


def _dynamic_quant(helper, x: str, y: str, scale: str, opset: int) -> list:
    """amax = |x|.max(-1, keepdims); scale = amax / 127; y = int8(clip(round(x / scale),
    -128, 127)), as plain PyTorch writes it (and exports it)."""
    from onnx import TensorProto

    nodes = [helper.make_node("Abs", [x], ["abs"])]
    if opset >= 18:
        nodes.append(helper.make_node("Constant", [], ["axes"], value_ints=[-1]))
        nodes.append(helper.make_node("ReduceMax", ["abs", "axes"], ["amax"], keepdims=1))
    else:
        nodes.append(helper.make_node("ReduceMax", ["abs"], ["amax"], axes=[-1], keepdims=1))
    for name, value in (("c127", 127.0), ("cmin", -128.0), ("cmax", 127.0)):
        nodes.append(helper.make_node("Constant", [], [name + "_f"], value_float=value))
        nodes.append(helper.make_node("CastLike", [name + "_f", x], [name]))
    nodes += [helper.make_node("Div", ["amax", "c127"], [scale]),
              helper.make_node("Div", [x, scale], ["scaled"]),
              helper.make_node("Round", ["scaled"], ["rounded"]),
              helper.make_node("Clip", ["rounded", "cmin", "cmax"], ["clipped"]),
              helper.make_node("Cast", ["clipped"], [y], to=TensorProto.INT8)]
    return nodes


def make_function(name: str, opset: int):
    """The FunctionProto ``op_sdk.npu.<name>`` for a model whose default-domain opset is
    ``opset``."""
    from onnx import helper

    if opset < MIN_OPSET:
        raise ValueError(f"op_sdk.onnx: function {DOMAIN}.{name} needs opset >= {MIN_OPSET} "
                         f"(CastLike), the model has {opset}")
    inputs, outputs = FUNCTIONS[name]
    if name == "SiluMul":
        body = _silu_mul(helper, "gate", "up", "y")
    elif name == "DynamicQuant":
        body = _dynamic_quant(helper, "x", "y", "scale", opset)
    elif name == "SiluMulQuant":
        body = _silu_mul(helper, "gate", "up", "h") + _dynamic_quant(helper, "h", "y", "scale",
                                                                      opset)
    else:
        raise ValueError(f"op_sdk.onnx: no function {DOMAIN}.{name}; known: {sorted(FUNCTIONS)}")
    return helper.make_function(DOMAIN, name, inputs, outputs, body,
                                [helper.make_opsetid("", opset)],
                                doc_string=f"{DOMAIN}.{name}: the standard-operator composite "
                                           "it fuses (the fallback where no fused kernel)")
