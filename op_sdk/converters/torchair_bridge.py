"""op_sdk's converters inside TorchAir: registration, and ``ge.<IrType>`` written through
TorchAir's own builder while TorchAir runs one of them.

:func:`register` gives TorchAir (``torchair._ge_concrete_graph.fx2ge_converter``) a
converter for each operator that has none there: TorchAir's converters of the operators
it covers stay in charge. While TorchAir calls one of op_sdk's, ``ge.<IrType>(...)`` builds
TorchAir's ``IrDef`` from the same pinned prototype and calls TorchAir's ``ge_op``, so the
operator lands in TorchAir's GE graph exactly as one of its generated IR wrappers would
put it; TorchAir's tensors are seen through :class:`_TaTensor` (op_sdk's Tensor API).
"""

from __future__ import annotations

import functools
import sys

import torch

from op_sdk.converters import ir
from op_sdk.converters.graph import Tensor, bind, building_with, external_builder

__all__ = ["active", "build", "const", "register", "torchair_available"]

_REGISTERED: set = set()  # the operators op_sdk registered its converter of
_DONE = False


def registered() -> bool:
    """Whether register() has run in this process (with TorchAir present)."""
    return _DONE


def active() -> bool:
    return external_builder() is _BUILDER


def torchair_available() -> bool:
    if "torchair" in sys.modules:
        return True
    try:
        import importlib.util

        return importlib.util.find_spec("torch_npu") is not None
    except (ImportError, ValueError):
        return False


class _DescView:
    """A TorchAir TensorDescriptor (protobuf) with dtype read / written as a GE name."""

    def __init__(self, desc):
        object.__setattr__(self, "_desc", desc)

    @property
    def dtype(self) -> str:
        from torchair._ge_concrete_graph.ge_ir_pb2 import DataType

        return DataType.Name(self._desc.dtype)

    @dtype.setter
    def dtype(self, name: str) -> None:
        from torchair._ge_concrete_graph.ge_ir_pb2 import DataType

        self._desc.dtype = DataType.Value(name)

    @property
    def shape(self):
        dims = list(self._desc.shape.dim)
        return tuple(dims) if self._desc.HasField("shape") else None

    @property
    def name(self) -> str:
        return self._desc.name


class _TaTensor(Tensor):
    """A TorchAir ``ge.Tensor`` behind op_sdk's Tensor API."""

    def __init__(self, t):
        self.ta = t

    @property
    def desc(self):
        return _DescView(self.ta.desc)

    @property
    def tensor(self) -> str:
        return self.ta.tensor

    @property
    def op(self):
        return _OpView(self.ta.node)

    @property
    def dtype(self) -> int:
        return self.ta.dtype

    @property
    def controller(self) -> str:
        return self.ta.controller

    @property
    def rank(self) -> int:
        return self.ta.rank

    @property
    def symsize(self):
        return list(self.ta.symsize)


class _OpView:
    def __init__(self, node):
        self.node = node

    @property
    def input_desc(self):
        return [_DescView(d) for d in self.node.input_desc]


def _wrap(v):
    from torchair.ge._ge_graph import Tensor as TaTensor

    if isinstance(v, TaTensor):
        return _TaTensor(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_wrap(x) for x in v)
    return v


def _unwrap(v):
    if isinstance(v, _TaTensor):
        return v.ta
    if isinstance(v, (list, tuple)):
        return type(v)(_unwrap(x) for x in v)
    return v


def _attr(a: ir.IrAttr, value):
    from torchair.ge import attr

    cls = {"Int": attr.Int, "Type": attr.Int, "Float": attr.Float, "Bool": attr.Bool,
           "String": attr.Str, "ListInt": attr.ListInt, "ListFloat": attr.ListFloat,
           "ListBool": attr.ListBool, "ListString": attr.ListStr, "DataType": attr.DataType,
           "ListDataType": attr.ListDataType, "ListListInt": attr.ListListInt,
           "ListListFloat": attr.ListListFloat}[a.type]
    return cls if value is ir.REQUIRED else cls(value)


def ir_def(proto: ir.IrPrototype):
    """TorchAir's IrDef of a pinned prototype."""
    from torchair._ge_concrete_graph.compat_ir import IrDef

    d = IrDef(proto.type)
    for i in proto.inputs:
        (d.dynamic_input if i.dynamic else d.optional_input if i.optional else d.input)(i.name, "")
    for a in proto.attrs:
        if a.required:
            d.required_attr(a.name, _attr(a, ir.REQUIRED))
        else:
            d.attr(a.name, _attr(a, a.default))
    for o in proto.outputs:
        d.output(o, "")
    return d


def build(op_type: str, args: tuple, kwargs: dict, node_name: str | None, dependencies=None):
    from torchair._ge_concrete_graph.compat_ir import ge_op

    proto = ir.prototype(op_type)
    inputs, attrs = bind(proto, args, kwargs, tensor_type=_TaTensor)
    out = ge_op(op_type=op_type,
                inputs={i.name: _unwrap(inputs.get(i.name)) for i in proto.inputs},
                outputs=list(proto.outputs),
                attrs={a.name: _attr(a, attrs[a.name]) for a in proto.attrs if a.name in attrs},
                node_name=node_name, ir=ir_def(proto),
                dependencies=_unwrap(list(dependencies)) if dependencies else None)
    return _wrap(tuple(out) if isinstance(out, list) else out)


def custom(op_type: str, inputs, outputs, attrs, node_name: str | None, dependencies=None):
    """``ge.custom_op(type, inputs=, outputs=, attrs=)`` through TorchAir's own."""
    from torchair._ge_concrete_graph.compat_ir import _custom_op
    from torchair.ge import attr as ta_attr

    ta_attrs = None
    if attrs is not None:
        ta_attrs = {k: getattr(ta_attr, v.cls)(v.value) if hasattr(v, "cls") else v
                    for k, v in attrs.items()}
    ta_inputs = inputs if not isinstance(inputs, dict) else {k: _unwrap(v) for k, v in inputs.items()}
    return _wrap(_custom_op(op_type, inputs=ta_inputs, outputs=outputs, attrs=ta_attrs,
                            node_name=node_name,
                            dependencies=_unwrap(list(dependencies)) if dependencies else None))


def const(value, dtype: int | torch.dtype | None, node_name: str | None, readable: bool = True):
    from torchair.ge import Const

    code = dtype
    if isinstance(dtype, torch.dtype):
        code = ir.GE_DTYPE[ir.dtype_name(dtype)]
    return _TaTensor(Const(value, dtype=code, node_name=node_name, readable=readable))


class _Builder:
    """TorchAir's graph builder, as op_sdk.converters.graph routes ``ge.*`` calls to it."""

    build = staticmethod(build)
    const = staticmethod(const)
    custom = staticmethod(custom)


_BUILDER = _Builder()


def _adapter(fn):
    @functools.wraps(fn)
    def convert(*args, meta_outputs=None, **kwargs):
        with building_with(_BUILDER):
            result = fn(*_wrap(args), meta_outputs=meta_outputs,
                        **{k: _wrap(v) for k, v in kwargs.items()})
        return _unwrap(result)

    convert.op_sdk_converter = fn
    return convert


def covered_by_torchair(op) -> bool:
    """Whether TorchAir has a converter of its own for ``op`` (its custom converters are
    imported first, as TorchAir imports them on its first conversion)."""
    import torchair._ge_concrete_graph.ge_converter.custom  # noqa: F401
    from torchair._ge_concrete_graph import fx2ge_converter

    if op in _REGISTERED:
        return False
    return (getattr(op, "_ge_converter", None) or fx2ge_converter._CONVERTERS.get(op)) is not None


def _has_npu_kernel(op) -> bool:
    """Whether op_sdk's own operator ``op`` runs on the NPU (an aclnn binding to its Ascend C
    kernel: op_sdk::rms_norm_rope), so that a graph TorchAir builds may hold it."""
    from op_sdk.library import get_op

    ns, name = op._schema.name.split("::")
    try:
        return get_op(name, ns).aclnn is not None
    except KeyError:
        return False


def register(converters: dict) -> list:
    """Register with TorchAir the converters of operators it does not convert; returns
    those operators ([] without TorchAir)."""
    if not torchair_available():
        return []
    try:
        import torch_npu  # noqa: F401
        from torchair._ge_concrete_graph.fx2ge_converter import register_fx_node_ge_converter
    except ImportError:
        return []
    global _DONE
    _DONE = True
    done = []
    for op, fn in converters.items():
        if not isinstance(op, torch._ops.OpOverload) or op.namespace in ("aten", "prims"):
            continue  # TorchAir converts ATen itself
        if op.namespace == "op_sdk" and not _has_npu_kernel(op):
            continue  # op_sdk's CPU-only operators (weight prepacking) never reach an NPU graph
        if op in _REGISTERED or covered_by_torchair(op):
            continue  # registered already, or TorchAir's own
        register_fx_node_ge_converter(op)(_adapter(fn))
        _REGISTERED.add(op)
        done.append(op)
    return done
