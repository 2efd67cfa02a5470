"""The machinery of the ONNX translations: what each slice's translation module
(``op_sdk/onnx/<slice>.py``) builds with, and the table they fill.

A translation takes an operator call's arguments (ONNX values for tensors, Python values
for the rest), checks what the export can express (:func:`unsupported` names the operator
and argument otherwise) and returns a :class:`Call`: the Ascend IR node to write (its type
and inputs in the prototype's order, :func:`proto_inputs`), its attributes, the overload
key of its function, and the standard-ONNX composite that computes it, built with a
:class:`Builder` from the shared pieces below (:func:`normalize`, :func:`dynamic_int8`,
:func:`static_int8`). ``@translates("npu_rms_norm")`` registers one; ``@writes_plain(
"npu_dtype_cast")`` registers a translation that writes standard ONNX directly (no custom
node). onnx / onnxscript / onnx_ir are imported inside the functions only.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from op_sdk._slices import import_slices

DOMAIN = "op_sdk.npu"  # the custom domain of op_sdk's nodes, written by export and fuse
DOMAIN_VERSION = 1

__all__ = ["DOMAIN", "DOMAIN_VERSION", "UnsupportedOnnxExport", "unsupported", "Builder", "Call", "translates",
           "writes_plain", "target", "local_function", "function_proto",
           "proto_inputs", "overload_key", "dt", "dtype_tag", "silu_mul", "normalize",
           "dynamic_int8", "static_int8", "ge_int8", "tracer", "translations", "load_slices"]


class UnsupportedOnnxExport(NotImplementedError):
    """An operator call (an argument's value) the ONNX export does not express."""


def unsupported(op: str, arg: str, rule: str):
    raise UnsupportedOnnxExport(f"{op}: argument '{arg}' {rule} (ONNX export)")


# ScalarType codes (op_sdk.ops._common)
UINT8, INT8, INT32, FLOAT16, FLOAT32, QINT8, QUINT8, BFLOAT16 = 0, 1, 3, 5, 6, 12, 13, 15


# ---- the table the slices fill ------------------------------------------------------------

# (operator, overload) -> a function of the call's arguments returning a Call; the operator
# is its name in the npu namespace, "<namespace>::<name>" in another
_CUSTOM: dict[tuple[str, str], Callable] = {}
# (operator, overload) -> a function writing standard ONNX into the trace
_PLAIN: dict[tuple[str, str], Callable] = {}
# the package's modules that are machinery, not a slice's translation
MACHINERY = ("export", "fuse", "functions", "translation")


def _key(namespace: str, name: str) -> str:
    return name if namespace == "npu" else f"{namespace}::{name}"


def target(key: str, overload: str = "default"):
    """The OpOverload a table key names."""
    import torch

    namespace, _, name = key.rpartition("::")
    return getattr(getattr(getattr(torch.ops, namespace or "npu"), name), overload)


def translates(name: str, overload: str = "default", namespace: str = "npu") -> Callable[[Callable], Callable]:
    """Register the translation of ``torch.ops.<namespace>.<name>.<overload>`` to a custom
    node."""
    def register(fn: Callable) -> Callable:
        _CUSTOM[(_key(namespace, name), overload)] = fn
        return fn
    return register


def writes_plain(name: str, overload: str = "default", namespace: str = "npu") -> Callable[[Callable], Callable]:
    """Register a translation of ``torch.ops.<namespace>.<name>.<overload>`` that writes
    standard ONNX operators into the trace itself (no custom node, no function)."""
    def register(fn: Callable) -> Callable:
        _PLAIN[(_key(namespace, name), overload)] = fn
        return fn
    return register


def load_slices() -> None:
    """Import every translation module of the package once."""
    import_slices(__package__, MACHINERY)


def translations() -> tuple[dict, dict]:
    """({(name, overload): custom-node translation}, {(name, overload): plain translation})."""
    load_slices()
    return dict(_CUSTOM), dict(_PLAIN)


# ---- node building ---------------------------------------------------------------------------

class Builder:
    """Appends nodes to a node list (the exporter's current trace, or a function body)."""

    def __init__(self, nodes: list, opset: int | None = None):
        import onnx_ir as ir

        self.ir = ir
        self.nodes = nodes
        self.opset = opset  # the default domain's; None: 18 or later
        self._consts: dict = {}

    def __call__(self, op_type: str, *inputs, _n: int = 1, _domain: str = "",
                 _overload: str = "", **attrs):
        ir = self.ir
        attributes = ir.convenience.convert_attributes(
            {k: v for k, v in attrs.items() if v is not None})
        node = ir.Node(_domain, op_type, list(inputs), attributes, overload=_overload,
                       num_outputs=_n, version=DOMAIN_VERSION if _domain else None)
        self.nodes.append(node)
        return node.outputs[0] if _n == 1 else tuple(node.outputs)

    def const(self, value, dtype):
        """A Constant of a numpy dtype (one node per distinct value within a builder)."""
        import numpy as np

        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = self("Constant", value=self.ir.tensor(arr))
        return self._consts[key]

    def f32(self, v):
        return self.const(v, "float32")

    def i64(self, v):
        return self.const(v, "int64")

    def cast(self, v, dtype):
        """Cast to an ir.DataType unless the value already has it."""
        if v.dtype == dtype:
            return v
        return self("Cast", v, to=int(dtype))

    def to_float(self, v):
        return self.cast(v, self.ir.DataType.FLOAT)

    def reduce(self, op_type: str, v, axes, keepdims: int = 1):
        """ReduceMean / ReduceMax over ``axes``: an input from opset 18 on, an attribute
        before."""
        if self.opset is not None and self.opset < 18:
            return self(op_type, v, axes=list(axes), keepdims=keepdims)
        return self(op_type, v, self.i64(list(axes)), keepdims=keepdims)


def dt(v):
    """ir.DataType of a value (None when unknown)."""
    return None if v is None else v.dtype


def dtype_tag(dt) -> str:
    return "none" if dt is None else dt.name.lower()


def overload_key(*parts) -> str:
    text = "_".join(str(p) for p in parts if p != "")
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def tracer():
    """The exporter's current trace (onnxscript's default evaluator)."""
    import onnxscript

    return onnxscript.evaluator.default()


def ge_int8() -> int:
    from op_sdk.converters.ir import GE_DTYPE

    return GE_DTYPE["DT_INT8"]


# ---- composites (standard ONNX) shared by several operators ---------------------------------
#
# Each composite takes a builder and the operand values (typed: the value's dtype is the
# operand's) and returns the operator's outputs. fp16 / bf16 operands are cast to fp32
# first: the references compute in fp32 and round once at the end, as these do.

def silu_mul(b, gate, up):
    """silu(gate) * up = gate * sigmoid(gate) * up."""
    return b("Mul", b("Mul", gate, b("Sigmoid", gate)), up)


def normalize(b, xf, gamma, epsilon, plus_one=False, dims=None):
    """fp32 rms-norm of xf over gamma's dims (or the last ``dims``) -> (y fp32, rstd fp32
    keep-dims); the weight is gamma, or 1 + gamma with ``plus_one`` (ops/_norm.py
    gamma_weight)."""
    ms = b.reduce("ReduceMean", b("Mul", xf, xf), range(-(dims or len(gamma.shape)), 0))
    rstd = b("Div", b.f32(1.0), b("Sqrt", b("Add", ms, b.f32(epsilon))))
    weight = b.to_float(gamma)
    if plus_one:
        weight = b("Add", weight, b.f32(1.0))
    y = b("Mul", b("Mul", xf, rstd), weight)
    return y, rstd


def dynamic_int8(b, v, smooth):
    """Symmetric per-token int8 of fp32 v (times smooth): (y int8, scale fp32 of
    v.shape[:-1]); an all-zero row gives scale 0 and y 0."""
    ir = b.ir
    if smooth is not None:
        v = b("Mul", v, b.to_float(smooth))
    last = b.i64([-1])
    amax = b.reduce("ReduceMax", b("Abs", v), [-1])
    inv = b("Where", b("Greater", amax, b.f32(0.0)), b("Div", b.f32(127.0), amax), b.f32(0.0))
    q = b("Clip", b("Round", b("Mul", v, inv)), b.f32(-128.0), b.f32(127.0))
    y = b("Cast", q, to=int(ir.DataType.INT8))
    scale = b("Squeeze", b("Div", amax, b.f32(127.0)), last)
    return y, scale


def static_int8(b, y, scales, zero_points, div_mode, lo=-128.0, hi=127.0, to=None):
    """round(y / scales + zero_points) (or y * scales), saturated to [lo, hi]; scales None:
    y itself."""
    ir = b.ir
    v = y
    if scales is not None:
        s = b.to_float(scales)
        v = b("Div", y, s) if div_mode else b("Mul", y, s)
    if zero_points is not None:
        v = b("Add", v, b.to_float(zero_points))
    q = b("Clip", b("Round", v), b.f32(lo), b.f32(hi))
    return b("Cast", q, to=int(to if to is not None else ir.DataType.INT8))


# ---- one call ------------------------------------------------------------------------------

class Call:
    """One operator call as the translation sees it: the Ascend IR node to write, its
    inputs (prototype order, trailing absent ones dropped), attributes, overload key, and the
    composite to compute it. The node's (and the composite's) outputs are the IR
    prototype's, in its order; ``order`` lists, for each of the operator's returns, the
    node output it is, where the two orders differ (npu_add_rms_norm_v2_functional's
    (rstd, y, x) of AddRmsNorm's (y, rstd, x): ``(1, 0, 2)``)."""

    def __init__(self, ir_type, inputs, attrs, key, composite, n_out, order=None):
        self.ir_type, self.inputs, self.attrs = ir_type, inputs, attrs
        self.key, self.composite, self.n_out = key, composite, n_out
        self.order = order


def proto_inputs(ir_type: str, named: dict) -> list:
    from op_sdk.converters.ir import prototype

    proto = prototype(ir_type)
    unknown = set(named) - {i.name for i in proto.inputs}
    assert not unknown, f"{ir_type}: no input {unknown}"
    ins = [named.get(i.name) for i in proto.inputs]
    while ins and ins[-1] is None:
        ins.pop()
    return ins


# ---- the model-local function of a custom node ---------------------------------------------

def local_function(call: Call, opset: int, inputs=None, outputs=None):
    """The onnx_ir Function of one overload (domain op_sdk.npu, name ``call.ir_type``,
    overload ``call.key``): formal inputs named after the IR prototype (or ``inputs``), typed
    like the call's operands (the body picks its casts from them), outputs named after the
    prototype's (or ``outputs``), body the call's composite at ``opset``."""
    import onnx_ir as ir

    if inputs is None or outputs is None:
        from op_sdk.converters.ir import prototype

        proto = prototype(call.ir_type)
        inputs = inputs or [i.name for i in proto.inputs]
        outputs = outputs or list(proto.outputs)
    formals = []
    for name, actual in zip(inputs, call.inputs):
        v = ir.Value(name=name)
        if actual is not None:
            v.dtype = actual.dtype
            if actual.shape is not None:
                v.shape = ir.Shape([None] * len(actual.shape))
        formals.append(v)
    nodes: list = []
    b = Builder(nodes, opset)
    outs = call.composite(b, *[f if a is not None else None
                               for f, a in zip(formals, call.inputs)])
    results = []
    for name, v in zip(outputs, outs):
        if v.producer() is None or v in results:  # a formal passed through, or repeated
            v = b("Identity", v)
        v.name = name if name not in {f.name for f in formals} else f"{name}_out"
        results.append(v)
    # intermediate values: unique names inside the body
    for i, node in enumerate(nodes):
        for j, out in enumerate(node.outputs):
            if out.name is None:
                out.name = f"_{i}_{j}"
    graph = ir.Graph(formals, results, nodes=nodes, opset_imports={"": opset},
                     name=f"{call.ir_type}_{call.key}")
    attrs = [ir.convenience.convert_attribute(k, v) for k, v in call.attrs.items()]
    return ir.Function(DOMAIN, call.ir_type, call.key, graph=graph, attributes=attrs)


def function_proto(call: Call, opset: int, inputs=None, outputs=None):
    """:func:`local_function` as an onnx FunctionProto (for a model held as a protobuf)."""
    import onnx_ir as ir

    return ir.serde.serialize_function(local_function(call, opset, inputs, outputs))
