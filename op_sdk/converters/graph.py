"""op_sdk's small GE graph builder: Ascend IR operators checked against their prototypes,
and the graph written as GE IR protobuf text (``ModelDef`` / ``GraphDef`` / ``OpDef`` of
CANN's ``ge_ir.proto``), without protobuf or CANN.

The builder writes what TorchAir's builder writes for the same call, field for field:

* an operator's ``input`` lists ``"<producer>:<output index>"`` for each *fed* input, in
  prototype order; its ``input_desc`` carries the input's name (the prototype's), dtype and
  shape; an unfed optional input is left out (GE binds inputs by name);
* ``output_desc`` names the prototype's outputs, with the dtype and shape of the FX
  node's value where known;
* an optional attribute equal to its prototype default is left out (so a graph stays
  loadable by an older CANN whose prototype lacks an attribute it does not use); required
  attributes and non-default values are written, typed as the prototype says.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

import torch

from op_sdk.converters import ir
from op_sdk.converters.attr import _Attr

__all__ = ["GeGraph", "Tensor", "OpDef", "Desc", "ge", "ConversionError", "current_graph"]


class ConversionError(RuntimeError):
    """A graph, node or call that cannot be written as Ascend IR."""


@dataclasses.dataclass
class Desc:
    """A TensorDescriptor: name, dtype (ge_ir.proto enum name), shape (-1: unknown dim)."""

    name: str = ""
    dtype: str = "DT_UNDEFINED"
    shape: tuple[int, ...] | None = None
    layout: str = "ND"
    attrs: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class OpDef:
    name: str
    type: str
    inputs: list[str] = dataclasses.field(default_factory=list)
    input_desc: list[Desc] = dataclasses.field(default_factory=list)
    output_desc: list[Desc] = dataclasses.field(default_factory=list)
    attrs: dict[str, tuple[str, Any]] = dataclasses.field(default_factory=dict)  # name -> (type, value)
    # output index -> the FX node's value it computes (its meta; not written)
    values: dict[int, Any] = dataclasses.field(default_factory=dict, repr=False, compare=False)

    def attr_values(self) -> dict[str, Any]:
        return {k: v for k, (_, v) in self.attrs.items()}


class Tensor:
    """One output of an operator of a :class:`GeGraph` (what a converter receives and
    returns; the same roles as TorchAir's ``ge.Tensor``)."""

    def __init__(self, op: OpDef, index: int = 0):
        self.op, self.index = op, index

    @property
    def desc(self) -> Desc:
        return self.op.output_desc[self.index]

    @property
    def tensor(self) -> str:
        return f"{self.op.name}:{self.index}"

    @property
    def controller(self) -> str:
        """The control-edge input that orders an operator after this tensor's (TorchAir's
        ``Tensor.controller``: ``"<operator>:-1"``)."""
        return f"{self.op.name}:-1"

    @property
    def dtype(self) -> int:
        """The ge::DataType code (as TorchAir's Tensor.dtype)."""
        return ir.GE_DTYPE.get(self.desc.dtype, ir.GE_DTYPE["DT_UNDEFINED"])

    @property
    def meta(self) -> Any:
        """The FX node's value this output computes (TorchAir's ``Tensor.meta``), if known."""
        return self.op.values.get(self.index)

    def _shape(self) -> tuple | None:
        if self.desc.shape is not None:
            return self.desc.shape
        return _shape(self.meta.shape) if isinstance(self.meta, torch.Tensor) else None

    @property
    def rank(self) -> int:
        shape = self._shape()
        if shape is None:
            raise ConversionError(f"GE conversion: the rank of {self.tensor} is unknown")
        return len(shape)

    @property
    def symsize(self) -> list[int]:
        return list(self._shape() or ())

    def __repr__(self) -> str:
        return f"Tensor({self.tensor}, {self.desc.dtype}, {self.desc.shape})"


_local = threading.local()


def external_builder():
    """The builder converters write through instead of op_sdk's graph (TorchAir's, while
    op_sdk.converters.torchair_bridge runs a converter inside TorchAir), or None."""
    builders = getattr(_local, "builders", None)
    return builders[-1] if builders else None


@contextlib.contextmanager
def building_with(builder):
    """Route this thread's ``ge.*`` calls to ``builder`` (an object with
    ``build(op_type, args, kwargs, node_name)`` and ``const(value, dtype, node_name)``)."""
    _local.builders = getattr(_local, "builders", []) + [builder]
    try:
        yield builder
    finally:
        _local.builders.pop()


def current_graph() -> GeGraph:
    stack = getattr(_local, "stack", None)
    if not stack:
        raise ConversionError("GE conversion: no graph is being built (use `with GeGraph():`)")
    return stack[-1]


class GeGraph:
    """A GE graph under construction: ``with GeGraph("name") as g: ...``."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.ops: list[OpDef] = []
        self._taken: set[str] = set()       # every node name in the graph
        self._next: dict[str, int] = {}     # base name -> the next suffix to try
        self.notes: list[str] = []  # comments written at the top of the pbtxt
        # the process groups the graph's collectives use: {GE group name: (ranks, tag)}
        self.process_groups: dict[str, tuple[list[int], str]] = {}

    def __enter__(self) -> GeGraph:
        _local.stack = getattr(_local, "stack", []) + [self]
        return self

    def __exit__(self, *exc) -> None:
        _local.stack.pop()

    def unique_name(self, base: str) -> str:
        """``base``, else ``base_1``, ``base_2``, ... : the first not yet in the graph."""
        n = self._next.get(base, 0)
        name = base if n == 0 else f"{base}_{n}"
        while name in self._taken:
            n += 1
            name = f"{base}_{n}"
        self._next[base] = n + 1
        self._taken.add(name)
        return name

    def add(self, op: OpDef) -> OpDef:
        self.ops.append(op)
        return op

    def op(self, name: str) -> OpDef:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(name)

    # -- built-in nodes --------------------------------------------------------------------

    def data(self, index: int, dtype: torch.dtype | None, shape, name: str | None = None) -> Tensor:
        desc = Desc("x", ir.proto_dtype(dtype), _shape(shape))
        op = OpDef(self.unique_name(name or "Data"), "Data", [], [desc],
                   [dataclasses.replace(desc, name="y")], {"index": ("Int", int(index))})
        return Tensor(self.add(op))

    def const(self, dtype: torch.dtype | None, shape, name: str | None = None,
              value: Sequence | torch.Tensor | None = None) -> Tensor:
        """A Const node. ``value`` (a short list, or a CPU tensor, written as its bytes) is
        written; a graph constant such as a frozen weight is written with its descriptor only
        (attr ``_op_sdk_value_omitted``)."""
        # unnamed, as TorchAir writes a Const's value / output descriptor
        desc = Desc("", ir.proto_dtype(dtype), _shape(shape))
        attrs: dict[str, tuple[str, Any]] = {}
        if isinstance(value, torch.Tensor):
            from torch._subclasses.fake_tensor import unset_fake_temporarily

            with unset_fake_temporarily():
                flat = value.detach().contiguous().reshape(-1)
                data = bytes(flat.view(torch.uint8).numpy()) if flat.numel() else b""
            attrs["value"] = ("Tensor", (desc, data))
        elif value is not None:
            attrs["value"] = ("Tensor", (desc, list(value)))
        else:
            attrs["value"] = ("Tensor", (desc, None))
            attrs["_op_sdk_value_omitted"] = ("Bool", True)
        op = OpDef(self.unique_name(name or "Const"), "Const", [], [], [desc], attrs)
        return Tensor(self.add(op))

    def net_output(self, outputs: Sequence[Tensor | None], values: Sequence | None = None) -> OpDef:
        """The graph's outputs; ``values`` (the FX outputs' values) give their shapes."""
        op = OpDef(self.unique_name("NetOutput"), "NetOutput")
        for i, t in enumerate(outputs):
            if t is None:
                continue
            op.inputs.append(t.tensor)
            desc = dataclasses.replace(t.desc, name=f"x{i}")
            v = values[i] if values is not None else None
            if isinstance(v, torch.Tensor):
                desc.dtype, desc.shape = ir.proto_dtype(v.dtype), _shape(v.shape)
            op.input_desc.append(desc)
        return self.add(op)

    # -- text ------------------------------------------------------------------------------

    def model_pbtxt(self, model_name: str | None = None) -> str:
        """The graph as a GE ``ModelDef`` in protobuf text format."""
        from op_sdk.converters import pbtxt

        return pbtxt.model(self, model_name or self.name)


def _shape(shape) -> tuple[int, ...] | None:
    if shape is None:
        return None
    from torch.fx.experimental.symbolic_shapes import is_concrete_int

    # a symbolic size is unknown at compile time: -1, read without int(), which would
    # specialise it to its hint (a guard: the next size recompiles)
    return tuple(int(d) if is_concrete_int(d) else -1 for d in shape)


def desc_from_value(value, name: str = "") -> Desc:
    """A descriptor from an FX node's value (a FakeTensor), or an empty one."""
    if isinstance(value, torch.Tensor):
        return Desc(name, ir.proto_dtype(value.dtype), _shape(value.shape))
    return Desc(name)


# -- building Ascend IR operators ----------------------------------------------------------


def _check_attr(proto: ir.IrPrototype, a: ir.IrAttr, value: Any) -> Any:
    where = f"GE conversion: {proto.type}: attribute '{a.name}' ({a.type})"
    if a.type in ("Int", "Type"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConversionError(f"{where} must be an int, got {value!r}")
        return int(value)
    if a.type == "Float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConversionError(f"{where} must be a float, got {value!r}")
        return float(value)
    if a.type == "Bool":
        if not isinstance(value, bool):
            raise ConversionError(f"{where} must be a bool, got {value!r}")
        return value
    if a.type == "String":
        if not isinstance(value, str):
            raise ConversionError(f"{where} must be a str, got {value!r}")
        return value
    item = {"ListInt": int, "ListFloat": (int, float), "ListBool": bool, "ListString": str}[a.type]
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(v, item) and (a.type == "ListBool" or not isinstance(v, bool))
            for v in value):
        raise ConversionError(f"{where} must be a list of {a.type[4:].lower()}, got {value!r}")
    return [float(v) for v in value] if a.type == "ListFloat" else list(value)


def _same(a: ir.IrAttr, value: Any) -> bool:
    d = a.default
    if a.type == "Float":
        return float(value) == float(d)
    if a.type == "ListFloat":
        return [float(v) for v in value] == [float(v) for v in d]
    return value == d


def bind(proto: ir.IrPrototype, args: tuple, kwargs: dict,
         tensor_type: type | tuple = None) -> tuple[dict, dict]:
    """Split a call into {input: Tensor | list | None} and {attr: value}, per prototype,
    raising on anything the prototype does not have."""
    tensor_type = tensor_type or Tensor
    inputs: dict[str, Any] = {}
    if len(args) > len(proto.inputs):
        raise ConversionError(f"GE conversion: {proto.type} takes {len(proto.inputs)} inputs "
                              f"({', '.join(i.name for i in proto.inputs)}), got {len(args)} "
                              f"positional arguments")
    for spec, value in zip(proto.inputs, args):
        inputs[spec.name] = value
    attrs: dict[str, Any] = {}
    input_names = {i.name for i in proto.inputs}
    attr_names = {a.name for a in proto.attrs}
    for k, v in kwargs.items():
        if k in input_names:
            if k in inputs:
                raise ConversionError(f"GE conversion: {proto.type}: input '{k}' given twice")
            inputs[k] = v
        elif k in attr_names:
            attrs[k] = v.value if isinstance(v, _Attr) else v  # TorchAir's ge.attr values too
        else:
            raise ConversionError(
                f"GE conversion: {proto.type} has no input or attribute '{k}' (inputs: "
                f"{', '.join(sorted(input_names)) or '-'}; attributes: "
                f"{', '.join(sorted(attr_names)) or '-'})")
    for spec in proto.inputs:
        v = inputs.get(spec.name)
        if v is None and not spec.optional:
            raise ConversionError(f"GE conversion: {proto.type}: required input '{spec.name}' "
                                  f"is missing")
        if v is not None and not (isinstance(v, tensor_type) or (
                spec.dynamic and isinstance(v, (list, tuple))
                and all(isinstance(t, tensor_type) for t in v))):
            raise ConversionError(f"GE conversion: {proto.type}: input '{spec.name}' must be a "
                                  f"GE tensor{' list' if spec.dynamic else ''}, got "
                                  f"{type(v).__name__}")
    for a in proto.attrs:
        if a.name not in attrs or attrs[a.name] is None:
            if a.required:
                raise ConversionError(f"GE conversion: {proto.type}: required attribute "
                                      f"'{a.name}' ({a.type}) is missing")
            attrs.pop(a.name, None)
            continue
        attrs[a.name] = _check_attr(proto, a, attrs[a.name])
    return inputs, attrs


def controls(op_type: str, dependencies) -> list[str]:
    """The control-edge inputs of ``dependencies`` (TorchAir's: None or a list of tensors)."""
    if dependencies is None:
        return []
    if not isinstance(dependencies, (list, tuple)):
        raise AssertionError(f"Invalid dependencies type:{type(dependencies).__name__} vs expect "
                             f"one of [None, list] for op '{op_type}'.")
    for d in dependencies:
        if not isinstance(d, Tensor):
            raise AssertionError(f"input '{d}' need to be Tensor, please check your input "
                                 f"(a dependency of op '{op_type}')")
    return [d.controller for d in dependencies]


def build(op_type: str, *args, node_name: str | None = None, dependencies=None, **kwargs):
    """Add one Ascend IR operator to the current graph; returns its output Tensor, or a
    tuple of them for a multi-output prototype. ``dependencies`` (tensors) become control
    edges ahead of the data inputs, as TorchAir's generated operator functions write them."""
    external = external_builder()
    if external is not None:  # converting inside TorchAir: its builder writes the graph
        return external.build(op_type, args, kwargs, node_name, dependencies)
    proto = ir.prototype(op_type)
    edges = controls(op_type, dependencies)
    inputs, attrs = bind(proto, args, kwargs)
    graph = current_graph()
    op = OpDef(graph.unique_name(node_name or op_type), op_type, inputs=edges)
    for spec in proto.inputs:
        v = inputs.get(spec.name)
        if v is None:
            continue
        for i, t in enumerate(v if isinstance(v, (list, tuple)) else [v]):
            op.inputs.append(t.tensor)
            op.input_desc.append(dataclasses.replace(
                t.desc, name=f"{spec.name}{i}" if spec.dynamic else spec.name, attrs={}))
    for a in proto.attrs:  # prototype order; optional defaults left out
        if a.name in attrs and (a.required or not _same(a, attrs[a.name])):
            op.attrs[a.name] = (a.type, attrs[a.name])
    op.output_desc = [Desc(o) for o in proto.outputs]
    graph.add(op)
    outs = tuple(Tensor(op, i) for i in range(len(proto.outputs)))
    return outs[0] if len(outs) == 1 else outs


def custom(op_type: str, inputs: dict | None, outputs: list | None, attrs: dict | None,
           node_name: str | None = None, dependencies=None):
    """TorchAir's ``ge.custom_op(op_type, inputs={...}, outputs=[...], attrs={...})``: an
    operator of any type, written as given (no prototype): each input by its name (a list is
    a dynamic input, ``name0``, ``name1``, ...; None an unfed optional input), each attribute
    a ``ge.attr`` value, each output a name or ``(name, count)``. Returns None (no outputs),
    the one output's tensor (a list for a dynamic output), or a tuple of them."""
    external = external_builder()
    if external is not None:
        return external.custom(op_type, inputs, outputs, attrs, node_name, dependencies)
    graph = current_graph()
    op = OpDef(graph.unique_name(node_name or op_type), op_type)
    if inputs is not None:
        if not isinstance(inputs, dict):
            raise AssertionError(f"Invalid input type:{type(inputs).__name__} vs expect one of "
                                 f"[None, dict] for custom op '{op_type}'.")
        for name, value in inputs.items():
            if value is None:
                op.inputs.append("")
                op.input_desc.append(Desc(name, attrs={"_is_unfed_optional": ("Int", 1)}))
                continue
            if isinstance(value, Tensor):
                value, names = [value], [name]
            elif isinstance(value, (list, tuple)):
                names = [f"{name}{i}" for i in range(len(value))]
            else:
                raise AssertionError(f"Invalid input '{name}' type:{type(value).__name__} vs "
                                     f"expect one of [None, ge.Tensor, list[ge.Tensor]] for "
                                     f"custom op '{op_type}'.")
            for i, (t, n) in enumerate(zip(value, names)):
                if not isinstance(t, Tensor):
                    raise AssertionError(f"Invalid input '{name}'[{i}] type:{type(t).__name__} "
                                         f"vs expect 'ge.Tensor' for custom op '{op_type}'.")
                op.inputs.append(t.tensor)
                op.input_desc.append(dataclasses.replace(t.desc, name=n, attrs={}))
    op.inputs += controls(op_type, dependencies)
    for k, v in (attrs or {}).items():
        if not isinstance(v, _Attr) or v.value is None:
            from op_sdk.converters import attr as ge_attr

            allowed = ", ".join(f"ge.attr.{n}" for n in sorted(ge_attr.__all__))
            raise AssertionError(f"Invalid attr '{k}' type:{type(v).__name__}"
                                 f"{' without a value' if isinstance(v, _Attr) else ''} vs "
                                 f"expect one of [{allowed}] for custom op '{op_type}'.")
        op.attrs[k] = (v.ir_type, v.value)
    graph.add(op)
    if outputs is None or len(outputs) == 0:
        if outputs is not None and not isinstance(outputs, (list, tuple)):
            raise AssertionError(f"Invalid output type:{type(outputs).__name__} vs expect one "
                                 f"of [list, tuple] for custom op '{op_type}'.")
        return None
    if not isinstance(outputs, (list, tuple)):
        raise AssertionError(f"Invalid output type:{type(outputs).__name__} vs expect one of "
                             f"[list, tuple] for custom op '{op_type}'.")
    result: list = []
    for out in outputs:
        if isinstance(out, str):
            op.output_desc.append(Desc(out))
            result.append(Tensor(op, len(op.output_desc) - 1))
            continue
        if not (isinstance(out, (tuple, list)) and len(out) == 2 and isinstance(out[0], str)
                and isinstance(out[1], int) and not isinstance(out[1], bool)):
            raise AssertionError(f"Invalid output {out!r} vs expect one of [str, tuple[str, int]] "
                                 f"for custom op '{op_type}'.")
        result.append([])
        for i in range(out[1]):
            op.output_desc.append(Desc(f"{out[0]}{i}"))
            result[-1].append(Tensor(op, len(op.output_desc) - 1))
    return tuple(result) if len(result) > 1 else result[0]


class _Ge:
    """``ge.<IrType>(inputs..., attr=value, ...)``: builds an Ascend IR operator of the pinned
    prototype table; ``ge.custom_op(type, ...)`` the same by name. Inputs are positional (in
    prototype order) or keywords; attributes are keywords."""

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            proto = ir.prototype(name)
        except KeyError:
            raise AttributeError(f"ge.{name}: no Ascend IR prototype of that name (a slice "
                                 f"declares its own with ir.declare, op_sdk.converters.ir holds "
                                 f"the general ones); register one with "
                                 f"op_sdk.converters.register_prototype") from None

        def op(*args, node_name: str | None = None, **kwargs):
            return build(name, *args, node_name=node_name, **kwargs)

        op.__name__ = name
        op.__doc__ = proto.reg_op()
        return op

    @staticmethod
    def custom_op(op_type: str, *args, inputs: dict | None = None, outputs: list | None = None,
                  attrs: dict | None = None, node_name: str | None = None, **kwargs):
        """TorchAir's two forms: ``custom_op(type, inputs={...}, outputs=[...], attrs={...})``
        writes the operator as given (:func:`custom`); ``custom_op(type, *args)`` binds the
        arguments to the type's registered prototype, inputs first, then its attributes in
        prototype order (op_sdk also takes attributes as keywords)."""
        if inputs is not None or outputs is not None or attrs is not None:
            if args or kwargs:
                raise ConversionError(
                    f"ge.custom_op({op_type!r}): give the operator's inputs either by its "
                    f"prototype (positional arguments) or as inputs= / outputs= / attrs=, "
                    f"not both")
            return custom(op_type, inputs, outputs, attrs, node_name)
        try:
            proto = ir.prototype(op_type)
        except KeyError:
            raise ConversionError(
                f"ge.custom_op({op_type!r}): no Ascend IR prototype of that type is registered "
                f"(register one with op_sdk.converters.register_prototype, or write the call "
                f"as custom_op(type, inputs=..., outputs=..., attrs=...))") from None
        n = len(proto.inputs)
        if len(args) > n + len(proto.attrs):
            raise IndexError(f"ge.custom_op({op_type!r}): the prototype has {n} inputs and "
                             f"{len(proto.attrs)} attributes, got {len(args)} arguments")
        for a, v in zip(proto.attrs, args[n:]):
            if a.name in kwargs:
                raise ConversionError(f"ge.custom_op({op_type!r}): attribute '{a.name}' given "
                                      f"twice")
            kwargs[a.name] = v
        return build(op_type, *args[:n], node_name=node_name, **kwargs)

    @staticmethod
    def Const(v: Any, dtype: int | torch.dtype | None = None, node_name: str | None = None,
              readable: bool = True) -> Tensor:
        """TorchAir's ``ge.Const``: a constant of ``v`` (a number, a nested list, a torch
        tensor), of ``dtype`` (a ``ge.DataType`` code; op_sdk also takes a torch dtype), else
        of v's dtype (a number or list: bool, int64 or float32, as TorchAir infers it);
        ``readable`` adds its ``_readable_value`` attribute (the value as Python prints it)."""
        if isinstance(v, Tensor):
            raise ValueError("Input v should not be a Tensor object for creating a Const node.")
        external = external_builder()
        if external is not None:
            return external.const(v, dtype, node_name, readable)
        graph = current_graph()
        if isinstance(dtype, str) and dtype in ir.PROTO_DTYPE and dtype not in ir.GE_NAME_TO_TORCH:
            # op_sdk's converters: an empty constant of a GE type torch has no dtype of (an
            # output switched off)
            if v != []:
                raise ValueError(f"ge.Const: a {dtype} constant can only be empty here (no "
                                 f"torch dtype holds its values), got {v!r}")
            out = graph.const(dtype, [0], node_name, [])
        else:
            value = const_value(v, dtype)
            out = graph.const(value.dtype, value.shape, node_name, value)
        if readable:
            out.op.attrs["_readable_value"] = ("String", repr(v))
        return out

    @staticmethod
    def Cast(x: Tensor, *, dst_type: int, dependencies=None, node_name: str | None = None) -> Tensor:
        """TorchAir's ``ge.Cast``: ``x`` as the ``ge.DataType`` ``dst_type``."""
        out = build("Cast", x, dst_type=dst_type, dependencies=dependencies,
                    node_name=node_name)
        if isinstance(out, Tensor) and isinstance(dst_type, int):  # (op_sdk's builder)
            out.desc.dtype = ir.ge_name(dst_type) or out.desc.dtype
        return out

    @staticmethod
    def Clone(x: Tensor, *, dependencies=None, node_name: str | None = None) -> Tensor:
        """TorchAir's ``ge.Clone``: a copy of ``x`` (GE's TensorMove)."""
        for t in [x, *(dependencies or [])]:
            if not isinstance(t, Tensor):
                raise AssertionError(f"input '{t}' need to be Tensor, please check your input")
        return build("TensorMove", x, dependencies=dependencies, node_name=node_name)


def const_value(v: Any, dtype: int | str | torch.dtype | None) -> torch.Tensor:
    """The CPU tensor a Const holds: ``v`` as ``dtype`` (a ge.DataType code or name, or a
    torch dtype; None: v's own, a Python float as float32)."""
    if isinstance(dtype, (int, str)) and not isinstance(dtype, bool):
        dtype = ir.torch_dtype(dtype)
    elif dtype is not None and not isinstance(dtype, torch.dtype):
        raise TypeError(f"ge.Const: dtype must be a ge.DataType code (or a torch dtype), got "
                        f"{dtype!r}")
    from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

    if isinstance(v, FakeTensor):
        raise ValueError("ge.Const: a fake tensor has no values to write")
    with unset_fake_temporarily():  # a conversion inside a compile: real tensors
        if isinstance(v, torch.Tensor):
            value = v.detach().to("cpu")
        else:
            try:
                value = torch.tensor(v)
            except (TypeError, ValueError, RuntimeError) as exc:
                raise ValueError(f"ge.Const: {v!r} is not a number or a (nested) list of "
                                 f"numbers: {exc}") from None
            if value.dtype == torch.float64 and dtype is None:  # TorchAir: numpy's float, float32
                value = value.to(torch.float32)
        return value if dtype is None else value.to(dtype)


ge = _Ge()
