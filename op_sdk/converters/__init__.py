"""Ascend IR (GE) converters: how each fused operator is written as a graph-engine
operator, the Ascend IR of the NPU deliverables.

One module per operator slice (``op_sdk/converters/<slice>.py``), written against
TorchAir's converter API::

    from op_sdk.converters import ge, register_fx_node_ge_converter

    @register_fx_node_ge_converter(torch.ops.npu.npu_add_rms_norm_quant.default)
    def convert(x1, x2, gamma, scales1, zero_points1=None, ..., meta_outputs=None):
        return ge.AddRmsNormQuant(x1, x2, gamma, scales1, scales2=scales2, ...)

``ge.<IrType>(...)`` checks every call against the pinned prototype table
(:mod:`op_sdk.converters.ir`). The same converter runs in two builders:

* op_sdk's own (:mod:`op_sdk.converters.graph`): :func:`convert_fx` turns an FX graph into
  a :class:`GeGraph`, which ``debug.graph_dump.type = "pbtxt"`` writes as GE IR text;
* TorchAir's, when torch_npu is installed: :func:`register_with_torchair` registers the
  converters of the operators TorchAir does not convert itself (npu_add_rms_norm_quant,
  a user's operators), so that TorchAir's own GE backend compiles them.

Nothing here is imported by ``import op_sdk``.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from op_sdk import _air
from op_sdk import library as _library
from op_sdk.converters import ir
from op_sdk.converters.graph import ConversionError, Desc, GeGraph, OpDef, Tensor, ge
from op_sdk.converters.graph import desc_from_value
from op_sdk.converters.ir import IrAttr, IrInput, IrPrototype, register_prototype
from op_sdk.converters.registry import _CONVERTERS, load_slices, register_fx_node_ge_converter
from op_sdk.converters.spec import GeIr
from op_sdk.scope import merged

__all__ = ["ge", "register_fx_node_ge_converter", "converter_for", "converters", "convert_fx",
           "register_with_torchair", "GeGraph", "Tensor", "OpDef", "Desc", "ConversionError",
           "IrPrototype", "IrInput", "IrAttr", "register_prototype", "TensorSpec", "UNCONVERTED", "GeIr"]

# The type of the placeholder node that stands for an FX node with no converter in a
# non-strict conversion (a graph dump): inputs and outputs as the node's, attribute
# "_fx_target" naming the PyTorch operator.
UNCONVERTED = "OpSdkUnconverted"

def converter_for(op) -> Callable | None:
    load_slices()
    return _CONVERTERS.get(op)


def converters() -> dict[Any, Callable]:
    """Every registered converter: op_sdk's and the user's."""
    load_slices()
    return dict(_CONVERTERS)


class TensorSpec:
    """TorchAir's ``ge.TensorSpec``: what a converter's ``meta_outputs`` holds per output.
    ``dtype`` is the ge.DataType code (None for a non-tensor), ``size`` the dims (raising
    for a dynamic one, as TorchAir), ``rank``; ``meta`` is the FX node's value itself."""

    __module__ = "op_sdk.ge"

    def __init__(self, meta_output):
        self.meta = meta_output
        if isinstance(meta_output, torch.Tensor):
            self._torch_dtype = meta_output.dtype
            self._symsize = list(meta_output.size())
        elif isinstance(meta_output, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            self._torch_dtype = _SYMBOLIC[type(meta_output)]
            self._symsize = []
        else:
            self._torch_dtype, self._symsize = None, None
        try:
            self._size = None if self._symsize is None else [int(str(d)) for d in self._symsize]
        except ValueError:  # a symbolic dim
            self._size = None

    @property
    def dtype(self) -> int | None:
        if self._torch_dtype is None:
            return None
        try:
            return ir.ge_dtype(self._torch_dtype)
        except ValueError:  # a torch dtype GE has no code of
            return ir.GE_DTYPE["DT_UNDEFINED"]

    @property
    def size(self) -> list[int]:
        if self._size is None:
            raise AssertionError(f"Trying get size() from dynamic spec {self} is not allowed")
        return self._size

    @property
    def rank(self) -> int:
        return len(self._symsize or ())

    def __repr__(self) -> str:
        code = self.dtype
        name = next((n for n, c in ir.GE_DTYPE.items() if c == code), "DT_UNDEFINED")
        return f"TensorSpec(dtype={name}, size={self._symsize})"


def _specs(value):
    if isinstance(value, (tuple, list)):
        return [TensorSpec(v) for v in value]
    return TensorSpec(value)


def _flat_tensors(value) -> list:
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flat_tensors(v)]
    return [value] if isinstance(value, Tensor) else []


# a symbolic scalar's dtype in the graph (TorchAir's: sizes are int64)
_SYMBOLIC = {torch.SymInt: torch.int64, torch.SymFloat: torch.float32, torch.SymBool: torch.bool}


def _fill_descs(result, value) -> None:
    """The dtype of each converted output from the FX node's value, where the converter left
    it open. As TorchAir, an operator's output descriptor carries no shape (the graph engine
    infers shapes); the graph's inputs, constants and outputs (NetOutput) carry theirs."""
    outs = result if isinstance(result, (tuple, list)) else (result,)
    vals = value if isinstance(value, (tuple, list)) else (value,)
    for t, v in zip(outs, vals):
        if isinstance(t, Tensor) and isinstance(v, torch.Tensor):
            t.op.values.setdefault(t.index, v)
            if t.desc.dtype == "DT_UNDEFINED":
                t.desc.dtype = ir.proto_dtype(v.dtype)
        elif isinstance(t, Tensor) and type(v) in _SYMBOLIC and t.desc.dtype == "DT_UNDEFINED":
            t.desc.dtype = ir.proto_dtype(_SYMBOLIC[type(v)])  # a size computed in the graph


def _placeholder(g: GeGraph, node: torch.fx.Node, args: list) -> Any:
    op = OpDef(g.unique_name(node.name), UNCONVERTED)
    op.attrs["_fx_target"] = ("String", _target_name(node.target))
    for i, t in enumerate(_flat_tensors(args)):
        op.inputs.append(t.tensor)
        op.input_desc.append(Desc(f"x{i}", t.desc.dtype, t.desc.shape))
    val = node.meta.get("val")
    vals = list(val) if isinstance(val, (tuple, list)) else [val]
    op.output_desc = [desc_from_value(v, f"y{i}") for i, v in enumerate(vals)]
    g.add(op)
    outs = tuple(Tensor(op, i) for i in range(len(vals)))
    return outs if isinstance(val, (tuple, list)) else outs[0]


def _target_name(target) -> str:
    if isinstance(target, torch._ops.OpOverload):
        return f"{target.namespace}.{target._opname}.{target._overloadname}"
    return getattr(target, "__name__", str(target))


# the air operators converted as attributes and control edges (wait_tensor has a converter)
_AIR = frozenset(_air.scope_op_names()) - {"air.wait_tensor.default"}
_BOOL_SCOPE_ATTRS = ("_op_exec_never_timeout", "_enable_inner_parallel")


class _Streams:
    """TorchAir's air scope operators in a converted graph, as TorchAir converts them: a
    scope's attributes (``_user_stream_label`` names the stream) are set on every operator
    converted inside it, outermost scope first (an empty ``_super_kernel_scope`` removes
    an enclosing super kernel's two attributes, and the rest of its own scope's);
    ``record`` is a control edge from the last operator converted on the current stream,
    and ``wait`` adds those edges (``"<op>:-1"`` inputs) to the next operator converted on
    its stream. A tagged record / wait is the same edge, from the operator before the last
    record of its tag (TorchAir's converter refuses them: it runs tagged events in ACL
    graphs only); ``record_tagged_stream`` adds nothing."""

    def __init__(self):
        self.stack: list[dict] = []
        self.last: dict[str, OpDef] = {}
        self.pending: dict[str, list[str]] = {}
        self.tagged: dict[str, str | None] = {}

    def current(self) -> str:
        for attrs in reversed(self.stack):
            if "_user_stream_label" in attrs:
                return attrs["_user_stream_label"]
        return ""

    def handle(self, target: str, args: list):
        if target == "air.scope_enter.default":
            self.stack.append(dict(zip(args[0], args[1])))
        elif target == "air.scope_exit.default":
            if not self.stack:
                raise ConversionError("GE conversion: air.scope_exit without a scope_enter")
            self.stack.pop()
        elif target in ("air.record.default", "air.tagged_event_record.default"):
            last = self.last.get(self.current())
            edge = f"{last.name}:-1" if last is not None else None
            if target == "air.tagged_event_record.default":
                self.tagged[args[0]] = edge
                return None
            return edge
        elif target == "air.tagged_event_wait.default":
            if self.tagged.get(args[0]):
                self.pending.setdefault(self.current(), []).append(self.tagged[args[0]])
        elif target.startswith("air.record_tagged_stream"):
            pass
        else:  # wait
            edges = [t for t in args[0] if isinstance(t, str)]
            edges += [f"{t.op.name}:-1" for t in args[0] if isinstance(t, Tensor)]
            self.pending.setdefault(self.current(), []).extend(edges)
        return None

    def placed(self, ops: list) -> None:
        if not ops:
            return
        stream = self.current()
        attrs = merged(self.stack)
        for op in ops:
            for key, v in attrs.items():
                op.attrs[key] = ("Bool", v == "True") if key in _BOOL_SCOPE_ATTRS \
                    else ("String", str(v))
        edges = self.pending.pop(stream, [])
        ops[0].inputs.extend(e for e in edges if e not in ops[0].inputs)
        self.last[stream] = ops[-1]


class _SizeOf:
    """A SymInt input that is a size of a tensor input: written, on its first use, as
    ``Gather(Shape(tensor), dim)`` (TorchAir reads such a size from its tensor, not as a
    graph input of its own)."""

    def __init__(self, node: torch.fx.Node, dim: int):
        self.node, self.dim = node, dim


def _sizes_of_inputs(gm: torch.fx.GraphModule, skip: set[int]) -> dict:
    """{symbol: (tensor placeholder, dim)}: the first tensor input (not a constant) having
    each plain symbol as a size."""
    found: dict = {}
    for position, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        val = node.meta.get("val")
        if position in skip or not isinstance(val, torch.Tensor):
            continue
        for dim, d in enumerate(val.shape):
            if isinstance(d, torch.SymInt) and d.node.expr.is_Symbol:
                found.setdefault(d.node.expr, (node, dim))
    return found


def _mutated_inputs(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """The inputs written back by the graph (AOTAutograd's ``copy_(input, value)``)."""
    return {n.args[0] for n in gm.graph.nodes if n.op == "call_function"
            and n.target is torch.ops.aten.copy_.default
            and isinstance(n.args[0], torch.fx.Node) and n.args[0].op == "placeholder"}


def convert_fx(gm: torch.fx.GraphModule, name: str = "graph", *, strict: bool = True,
               constants: dict[int, tuple[str, torch.Tensor]] | None = None,
               module_stack: bool = False,
               ref_data: Callable[[int], str] | None = None,
               input_names: dict[int, str] | None = None) -> GeGraph:
    """The FX graph ``gm`` (nodes with ``meta["val"]``, as Dynamo / AOTAutograd make them)
    as a GE graph. ``strict``: a node with no converter raises :class:`ConversionError`
    naming it; otherwise it becomes an :data:`UNCONVERTED` placeholder node and is listed
    in ``graph.notes``. ``constants`` {placeholder position: (name, tensor)}: those inputs
    (a model's weights) are written as Const nodes of that name holding the tensor's bytes;
    the other placeholders are the graph's Data inputs, indexed in order. ``module_stack``:
    each operator converted from a node carries the node's ``nn_module_stack`` (as its
    string, TorchAir's ``export.experimental.enable_record_nn_module_stack``).

    Symbolic sizes as TorchAir writes them: a SymInt input that is a size of a tensor input
    is ``Gather(Shape(tensor), dim)``, made where it is first used; any other is a scalar
    int64 Data; a list of sizes holding a symbolic one is a ``Pack``; a SymInt output is
    not a graph output. As TorchAir's graph passes then do, a Pack of symbolic-size Data
    only becomes one Data of the packed sizes (one per distinct list), and Data nodes
    nothing reads are removed, the rest renumbered in order. ``ref_data`` {input position ->
    name}: the inputs the graph writes back (its ``copy_(input, value)``) are ``RefData``
    nodes of that name (TorchAir's export), and the write-back is the value itself.
    ``input_names`` {input position: name}: the names of those inputs' Data nodes (else the
    FX placeholder's)."""
    load_slices()
    env: dict[torch.fx.Node, Any] = {}
    missing: dict[str, int] = {}

    def value(a):
        if isinstance(a, torch.fx.Node):
            v = env[a]
            if isinstance(v, _SizeOf):  # a size of an input tensor, made on its first use
                v = env[a] = ge.Gather(ge.Shape(value(v.node), dtype=ir.GE_DTYPE["DT_INT64"]),
                                       ge.Const(v.dim, dtype=torch.int64))
                v.desc.dtype, v.desc.shape = "DT_INT64", ()
            return v
        if isinstance(a, (list, tuple)):
            return type(a)(value(v) for v in a)
        if isinstance(a, dict):
            return {k: value(v) for k, v in a.items()}
        return a

    streams = _Streams()
    constants = constants or {}
    sizes = _sizes_of_inputs(gm, set(constants))
    refs = _mutated_inputs(gm) if ref_data is not None else set()
    sym_data: set[str] = set()
    with GeGraph(name) as g:
        index = position = 0
        for node in gm.graph.nodes:
            if node in refs or (node.op == "call_function" and node.target is
                                torch.ops.aten.copy_.default and node.args[0] in refs):
                if node.op == "placeholder":  # an input written back: RefData
                    data = g.data(index, _val_dtype(node), node.meta["val"].shape,
                                  name=ref_data(position))
                    data.op.type = "RefData"
                    data.op.attrs["_origin_data_name"] = (
                        "String", (input_names or {}).get(position, node.name))
                    env[node] = data
                    index += 1
                    position += 1
                else:  # the write-back: its value is the graph's result
                    env[node] = value(node.args[1])
                continue
            if node.op == "call_function" and str(node.target) in _AIR:
                env[node] = streams.handle(str(node.target), value(list(node.args)))
                continue
            first_op = len(g.ops)
            val = node.meta.get("val")
            if node.op == "placeholder" and position in constants:
                weight, tensor = constants[position]
                position += 1
                env[node] = g.const(tensor.dtype, tensor.shape, weight, tensor.detach().cpu())
            elif node.op == "placeholder" and isinstance(val, torch.SymInt) \
                    and val.node.expr in sizes:
                position += 1
                env[node] = _SizeOf(*sizes[val.node.expr])
            elif node.op == "placeholder":
                position += 1
                shape = val.shape if isinstance(val, torch.Tensor) else ()
                env[node] = g.data(index, _val_dtype(node), shape,
                                   name=(input_names or {}).get(position - 1, node.name))
                if not isinstance(val, torch.Tensor):
                    sym_data.add(env[node].op.name)
                index += 1
            elif node.op == "get_attr":
                obj = gm
                for part in str(node.target).split("."):
                    obj = getattr(obj, part)
                if isinstance(obj, torch.Tensor):
                    env[node] = g.const(obj.dtype, obj.shape, name=node.name)
                else:
                    env[node] = obj
            elif node.op == "call_function":
                if node.target is operator.getitem:
                    env[node] = value(node.args[0])[node.args[1]]
                    continue
                conv = _CONVERTERS.get(node.target)
                args, kwargs = value(list(node.args)), value(dict(node.kwargs))
                if conv is None:
                    target = _target_name(node.target)
                    if strict:
                        raise ConversionError(
                            f"GE conversion: no converter for {target} (FX node "
                            f"'{node.name}'); register one with "
                            f"op_sdk.converters.register_fx_node_ge_converter")
                    missing[target] = missing.get(target, 0) + 1
                    env[node] = _placeholder(g, node, args)
                    streams.placed(g.ops[first_op:])
                    continue
                try:
                    result = conv(*args, meta_outputs=_specs(val), **kwargs)
                except ConversionError as e:
                    raise ConversionError(f"{e} (FX node '{node.name}')") from None
                _fill_descs(result, val)
                env[node] = result
                streams.placed(g.ops[first_op:])
                stack = node.meta.get("nn_module_stack") if module_stack else None
                for op in g.ops[first_op:] if stack is not None else ():
                    op.attrs["nn_module_stack"] = ("String", str(stack))
            elif node.op == "output":
                outs = node.args[0]
                flat = outs if isinstance(outs, (list, tuple)) else [outs]
                results = [value(o) if isinstance(o, torch.fx.Node) else None for o in flat]
                g.net_output([r if isinstance(r, Tensor) and isinstance(
                    o.meta.get("val"), torch.Tensor) else None for o, r in zip(flat, results)],
                    [o.meta.get("val") if isinstance(o, torch.fx.Node) else None for o in flat])
            else:
                raise ConversionError(f"GE conversion: FX node '{node.name}' ({node.op}) "
                                      f"cannot be converted")
    _packed_sizes_as_data(g, sym_data)
    used = {i.rsplit(":", 1)[0] for op in g.ops for i in op.inputs}  # (control edges too)
    # unread constants and inputs; the inputs left renumbered in order
    g.ops = [op for op in g.ops if op.type not in ("Const", "Data") or op.name in used]
    for i, op in enumerate(op for op in g.ops if op.type in ("Data", "RefData")):
        op.attrs["index"] = ("Int", i)
    if missing:
        g.notes.append(f"{sum(missing.values())} node(s) with no GE converter, written as "
                       f"{UNCONVERTED} placeholders: " +
                       ", ".join(f"{k} x{v}" for k, v in sorted(missing.items())))
    g.unconverted = missing
    return g


def _val_dtype(node: torch.fx.Node) -> torch.dtype:
    """The dtype of a placeholder's Data: its tensor's, int64 for a symbolic size."""
    val = node.meta.get("val")
    return val.dtype if isinstance(val, torch.Tensor) else torch.int64


def _packed_sizes_as_data(g: GeGraph, sym_data: set[str]) -> None:
    """TorchAir's ``optimize_sym_pack``: a Pack whose every input is a symbolic-size Data
    (sizes the host knows) becomes one more Data holding the packed sizes; Packs of the
    same inputs share it."""
    made: dict[tuple[str, ...], Tensor] = {}
    renamed: dict[str, str] = {}
    index = sum(1 for op in g.ops if op.type in ("Data", "RefData"))
    for op in [op for op in g.ops if op.type == "Pack"]:
        if not op.inputs or not all(i.endswith(":0") and i[:-2] in sym_data for i in op.inputs):
            continue
        key = tuple(op.inputs)
        if key not in made:
            made[key] = g.data(index, torch.int64, (len(key),))
            index += 1
        renamed[f"{op.name}:0"] = made[key].tensor
        g.ops.remove(op)
    for op in g.ops:
        op.inputs = [renamed.get(i, i) for i in op.inputs]


def register_with_torchair() -> list:
    """Register op_sdk's converters with TorchAir for the operators TorchAir has no
    converter of; returns those operators. A no-op (empty list) without torch_npu."""
    from op_sdk.converters import torchair_bridge

    return torchair_bridge.register(converters())


def _attach_declared(opdef) -> None:
    if opdef.ge is not None:
        from op_sdk.converters.spec import attach

        attach(opdef, opdef.ge)


# operators declared with ge=GeIr(...) (before or after this import) get their converter
_library.on_define(_attach_declared)
