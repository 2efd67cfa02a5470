"""The GE converter of an operator, declared: ``define_op(..., ge=GeIr("SiluMulQuant"))``.

From the operator's schema and a :class:`GeIr`, op_sdk derives the Ascend IR prototype
(registered with :func:`~op_sdk.converters.ir.register_prototype`) and the converter
(registered with :func:`~op_sdk.converters.register_fx_node_ge_converter`): the schema's
tensor arguments become the IR's inputs (``Tensor?`` ones optional), its other arguments
the IR's attributes (types from the schema, defaults from the schema's defaults), its
returns the IR's outputs. ``inputs`` / ``attrs`` pick and order them where the IR differs,
``rename`` maps a schema argument to another IR name, ``outputs`` names the outputs.
"""

from __future__ import annotations

import dataclasses

import torch

from op_sdk.converters import ir

__all__ = ["GeIr", "attach", "prototype_of"]


@dataclasses.dataclass(frozen=True)
class GeIr:
    type: str
    inputs: tuple[str, ...] | None = None   # schema argument names, in the IR's input order
    attrs: tuple[str, ...] | None = None    # schema argument names, in the IR's attribute order
    outputs: tuple[str, ...] | None = None  # the IR's output names
    rename: tuple[tuple[str, str], ...] = ()  # (schema argument, IR name)


def _attr_type(arg) -> str:
    t = arg.type
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    kind = t.kind()
    simple = {"FloatType": "Float", "IntType": "Int", "BoolType": "Bool", "StringType": "String",
              "ScalarTypeType": "Int"}
    if kind in simple:
        return simple[kind]
    if kind == "ListType":
        inner = t.getElementType().kind()
        lists = {"IntType": "ListInt", "FloatType": "ListFloat", "BoolType": "ListBool",
                 "StringType": "ListString", "SymIntType": "ListInt"}
        if inner in lists:
            return lists[inner]
    if kind == "SymIntType":
        return "Int"
    raise ValueError(f"GeIr: argument '{arg.name}' of type {arg.type} cannot be an IR attribute")


def _is_tensor(arg) -> bool:
    t = arg.type
    if isinstance(t, torch.OptionalType):
        t = t.getElementType()
    return t.kind() == "TensorType"


def _schema(opdef) -> torch.FunctionSchema:
    return torch._C.parse_schema(opdef.schema)


def prototype_of(opdef, spec: GeIr) -> ir.IrPrototype:
    schema = _schema(opdef)
    args = {a.name: a for a in schema.arguments}
    rename = dict(spec.rename)
    for name in list(spec.inputs or ()) + list(spec.attrs or ()) + list(rename):
        if name not in args:
            raise ValueError(f"GeIr({spec.type}) of {opdef.qualname}: the schema has no "
                             f"argument '{name}'")
    in_names = spec.inputs if spec.inputs is not None else \
        tuple(a.name for a in schema.arguments if _is_tensor(a))
    attr_names = spec.attrs if spec.attrs is not None else \
        tuple(a.name for a in schema.arguments if not _is_tensor(a))
    inputs = []
    for n in in_names:
        if not _is_tensor(args[n]):
            raise ValueError(f"GeIr({spec.type}) of {opdef.qualname}: input '{n}' is not a "
                             f"tensor argument")
        inputs.append(ir.IrInput(rename.get(n, n),
                                 optional=isinstance(args[n].type, torch.OptionalType)))
    attrs = []
    for n in attr_names:
        a = args[n]
        default = a.default_value if a.has_default_value() else ir.REQUIRED
        typ = _attr_type(a)
        if typ == "Float" and isinstance(default, int) and not isinstance(default, bool):
            default = float(default)
        attrs.append(ir.IrAttr(rename.get(n, n), typ, default))
    outputs = spec.outputs
    if outputs is None:
        names = [r.name for r in schema.returns]
        outputs = tuple(names) if all(names) else \
            (("y",) if len(names) == 1 else tuple(f"y{i}" for i in range(len(names))))
    if len(outputs) != len(schema.returns):
        raise ValueError(f"GeIr({spec.type}) of {opdef.qualname}: {len(outputs)} output names "
                         f"for {len(schema.returns)} returns")
    return ir.IrPrototype(spec.type, tuple(inputs), tuple(outputs), tuple(attrs),
                          source=f"declared by {opdef.qualname}")


def attach(opdef, spec: GeIr) -> None:
    """Register ``opdef``'s prototype and converter from ``spec``."""
    if not isinstance(spec, GeIr):
        raise TypeError(f"op_sdk.define_op({opdef.name}): ge= must be an "
                        f"op_sdk.converters.GeIr, got {type(spec).__name__}")
    from op_sdk.converters._util import dtype_of, ge_type
    from op_sdk.converters.graph import build
    from op_sdk.converters.registry import register_fx_node_ge_converter

    proto = ir.register_prototype(prototype_of(opdef, spec))
    schema = _schema(opdef)
    names = [a.name for a in schema.arguments]
    rename = dict(spec.rename)
    in_names = {i.name for i in proto.inputs}
    scalar_types = {a.name for a in schema.arguments
                    if "ScalarType" in str(a.type)}

    def convert(*args, meta_outputs=None, **kwargs):
        bound = dict(zip(names, args))
        bound.update(kwargs)
        call = {}
        for n, v in bound.items():
            ir_name = rename.get(n, n)
            if ir_name in in_names or any(a.name == ir_name for a in proto.attrs):
                if n in scalar_types and v is not None:
                    v = ge_type(dtype_of(v, opdef.name, n))
                call[ir_name] = v
        return build(proto.type, **call)

    convert.__name__ = f"convert_{opdef.name}"
    register_fx_node_ge_converter(opdef.op)(convert)
    from op_sdk.converters import torchair_bridge

    if torchair_bridge.registered():  # op_sdk's converters are with TorchAir: this one too
        torchair_bridge.register({opdef.op: convert})
