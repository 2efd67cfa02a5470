"""max-autotune with air stream scopes: each stream's regions compiled by Inductor as
partitions of their own, launched on their streams.

Inductor schedules one graph as one stream. A graph whose scopes name more than one stream
is therefore compiled in pieces:

1. The whole graph goes through Inductor's post-grad passes and the pipeline's stages as
   usual (the passes see every stream, so the fusion stages' same-stream rule holds).
   At the end of the last stage, the pipeline raises ``PartitionRequest`` instead of
   lowering the scopes to one stream; ``inner_compile`` (the ``inner_compile`` handed to
   ``compile_fx``) catches it.
2. ``split`` cuts the processed graph into segments: maximal runs of nodes of one stream in
   graph order, cut at every scope operator. Each segment becomes a GraphModule whose
   inputs are the values it reads from elsewhere and whose outputs are the values read
   elsewhere (every output keeps the strides of the whole graph's trace, which the next
   segments were compiled for). An outer graph keeps the placeholders, the scope operators,
   one call per segment (plus a ``getitem`` per value it hands on) and the output.
3. Each segment is compiled by ``compile_fx_inner`` with the pipeline's custom passes
   switched off (they already ran; Inductor's own post-grad passes run again inside each
   segment), through Inductor's FX graph cache like any graph. A side stream's segments
   are generated for its worker's intra-op thread count (``cpp.threads``).
4. The outer graph runs on the stream executors of streams.py: on CPU each side stream's
   segments on its worker thread, on CUDA on its side stream, ordered by the same plan as
   reduce-overhead's (data edges, record / wait, writes as barriers).

The result is an ``OutputCode`` without an FX-graph-cache key, so AOTAutograd's cache does
not store it; the segments themselves are cached by Inductor.
"""

from __future__ import annotations

import contextlib
import dataclasses
import operator
from unittest import mock
from collections.abc import Sequence
from typing import Any

import torch
from torch._inductor.output_code import OutputCode
from torch.fx import Graph, GraphModule, Node

from op_sdk.compiler import streams

__all__ = ["PartitionRequest", "Segment", "split", "inner_compile", "StreamPartitionedCode"]


class PartitionRequest(Exception):
    """Raised by the pipeline's last stage: ``gm`` (post-grad, passes done) has several
    streams and is to be compiled as one partition per stream region."""

    def __init__(self, gm: GraphModule):
        super().__init__("op_sdk: the graph has several air streams: compile it in partitions")
        self.gm = gm


@dataclasses.dataclass
class Segment:
    """One partition: a run of nodes of one stream."""

    index: int
    stream: str
    nodes: list[Node]
    inputs: list[Node]                 # values of the whole graph it reads
    outputs: list[Node]                # its values read elsewhere
    writes: bool                       # holds a node that writes memory
    gm: GraphModule | None = None
    cap: int | None = None             # its limit_core_num region's thread cap

    @property
    def name(self) -> str:
        return f"op_sdk_stream_partition_{self.index}_{self.stream}"


class _Launch:
    """The call of one compiled segment in the outer graph (``node.target``)."""

    def __init__(self, segment: Segment):
        self.compiled: Any = None          # set once the segment is compiled
        self.segment = segment
        self.__name__ = segment.name

    @property
    def stream(self) -> str:
        return self.segment.stream

    @property
    def op_sdk_writes(self) -> bool:       # read by streams.writes: a write is a barrier
        return self.segment.writes

    def __call__(self, *args):
        if torch.autograd.profiler._is_profiler_enabled:
            # a range per segment: Inductor's generated kernels record none of their own
            with torch.profiler.record_function(f"op_sdk::{self.__name__}"):
                return self.compiled(list(args))
        return self.compiled(list(args))

    def __repr__(self) -> str:
        return self.__name__


def _getitems_after_their_source(graph: Graph) -> None:
    """A ``getitem`` of a multi-output node goes right after it, so both are in one segment
    (a segment hands on tensors, not tuples)."""
    for node in list(graph.nodes):
        if node.op == "call_function" and node.target is operator.getitem:
            source = node.args[0]
            if isinstance(source, Node) and not isinstance(source.meta.get("val"), torch.Tensor):
                last = source
                while last.next.op == "call_function" and last.next.target is operator.getitem \
                        and last.next.args[0] is source and last.next is not node:
                    last = last.next
                if last.next is not node:
                    last.append(node)


def split(gm: GraphModule) -> tuple[Graph, list[Segment]]:
    """The outer graph (each segment call's target a ``_Launch`` whose compiled code is
    still to be set) and the segments, in graph order."""
    graph = gm.graph
    _getitems_after_their_source(graph)
    stream = streams.stream_of(graph)
    caps = streams.thread_caps(graph)
    runs: list[list[Node]] = []
    current: list[Node] | None = None
    for node in graph.nodes:
        if node.op == "get_attr":
            continue
        if node.op in ("placeholder", "output") or streams.is_scope_op(node):
            current = None
            continue
        if current is None or stream[current[-1]] != stream[node]:
            current = []
            runs.append(current)
        current.append(node)

    segments: list[Segment] = []
    where: dict[Node, Segment] = {}
    for i, nodes in enumerate(runs):
        members = set(nodes)
        inputs = list(dict.fromkeys(d for n in nodes for d in n.all_input_nodes
                                    if d not in members and d.op != "get_attr"))
        outputs = [n for n in nodes if any(u not in members for u in n.users)]
        seg = Segment(i, stream[nodes[0]], nodes, inputs, outputs,
                      writes=any(streams.writes(n) for n in nodes), cap=caps.get(nodes[0]))
        seg.gm = _segment_module(gm, seg)
        segments.append(seg)
        for n in nodes:
            where[n] = seg

    outer = Graph()
    env: dict[Node, Node] = {}
    for node in graph.nodes:
        seg = where.get(node)
        if seg is None:
            if node.op == "get_attr" and not any(u not in where for u in node.users):
                continue       # read by segments only: each segment holds it
            env[node] = outer.node_copy(node, lambda n: env[n])
            continue
        if node is not seg.nodes[0]:
            continue
        call = outer.call_function(_Launch(seg), tuple(env[d] for d in seg.inputs))
        call.meta["op_sdk_segment"] = seg.index
        for k, out in enumerate(seg.outputs):
            item = outer.call_function(operator.getitem, (call, k))
            item.meta.update(out.meta)
            env[out] = item
    return outer, segments


def _segment_module(gm: GraphModule, seg: Segment) -> GraphModule:
    g = Graph()
    env: dict[Node, Node] = {}
    for d in seg.inputs:
        env[d] = g.placeholder(d.name)
        env[d].meta.update(d.meta)
    for n in seg.nodes:
        for d in n.all_input_nodes:
            if d not in env:       # a constant (get_attr): each segment reads its own
                env[d] = g.node_copy(d)
        env[n] = g.node_copy(n, lambda a: env[a])
    out = g.output(tuple(env[o] for o in seg.outputs))
    # every output is handed on to other compiled code: keep the traced strides
    out.meta["user_visible_output_idxs"] = list(range(len(seg.outputs)))
    sub = GraphModule(gm, g)
    sub.meta.update({k: v for k, v in gm.meta.items() if k != "op_sdk_report"})
    return sub


def _output_values(gm: GraphModule) -> list[Any]:
    args = gm.graph.output_node().args[0]
    leaves = args if isinstance(args, (list, tuple)) else [args]
    return [a.meta.get("val") if isinstance(a, Node) else a for a in leaves]


class StreamPartitionedCode(OutputCode):
    """The compiled graph: the outer graph on a stream executor over compiled segments."""

    _boxed_call = True

    def __init__(self, program, segments: Sequence[Segment]):
        super().__init__()
        self.program = program
        self.segments = list(segments)

    def __call__(self, inputs: Sequence[Any]) -> Any:
        return self.program(inputs)

    def post_compile(self, example_inputs, constants, graph_kwargs) -> None:
        pass       # each segment's compiled code had its own post_compile

    def prepare_for_serialization(self) -> None:
        pass       # not cached as a whole (no FX graph cache key)

    def set_triton_bundle(self, triton_bundle: Any) -> None:
        pass


def _unwrap(exc: BaseException) -> PartitionRequest | None:
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, PartitionRequest):
            return exc
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return None


def inner_compile(gm: GraphModule, example_inputs: Sequence[Any], **kwargs):
    """``compile_fx_inner``, or, for a graph the pipeline asks to partition, one
    ``compile_fx_inner`` per segment and a stream program over them."""
    from torch._inductor.compile_fx import compile_fx_inner

    try:
        return compile_fx_inner(gm, example_inputs, **kwargs)
    except Exception as exc:  # noqa: BLE001 - re-raised unless it is the pipeline's request
        request = _unwrap(exc)
        if request is None:
            raise
    return compile_partitions(request.gm, example_inputs, kwargs)


def compile_partitions(gm: GraphModule, example_inputs: Sequence[Any], kwargs: dict):
    from torch._inductor import config as inductor_config
    from torch._inductor.compile_fx import compile_fx_inner
    from torch._guards import detect_fake_mode
    from torch._inductor.utils import BoxedBool

    outer, segments = split(gm)
    launches = {n.target.segment.index: n.target for n in outer.nodes
                if isinstance(n.target, _Launch)}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    static = {placeholders[i] for i in kwargs.get("static_input_idxs", ()) or ()
              if i < len(placeholders)}
    # each compile_fx_inner reports its graph's output strides to AOTAutograd through the
    # tracing context: the segments' are their own; the whole graph's are its outputs'
    context = torch._guards.TracingContext.try_get()
    strides = context.output_strides if context is not None else None
    # a segment may read constants the passes added (weight_prepack's packed weights): real
    # tensors, as after Inductor's own freezing
    fake_mode = detect_fake_mode(example_inputs)
    allow = (mock.patch.object(fake_mode, "allow_non_fake_inputs", True)
             if fake_mode is not None else contextlib.nullcontext())
    with allow, inductor_config.patch(post_grad_custom_pre_pass=None,
                                      post_grad_custom_post_pass=None):
        for seg in segments:
            part = dict(kwargs)
            part["static_input_idxs"] = [i for i, d in enumerate(seg.inputs) if d in static]
            part["cudagraphs"] = BoxedBool(False)
            example = [d.meta["val"] for d in seg.inputs]
            if strides is not None:
                strides.clear()
            # Inductor's CPU kernels fix their OpenMP thread count when generated: a side
            # stream's get its worker's (OP_SDK_STREAM_THREADS), as its ATen calls do; a
            # limit_core_num region's at most its cap
            threads = streams.stream_threads() if seg.stream != streams.MAIN else None
            if seg.cap is not None:
                threads = min(seg.cap, threads or torch.get_num_threads())
            with inductor_config.patch({"cpp.threads": threads} if threads else {}):
                launches[seg.index].compiled = compile_fx_inner(seg.gm, example, **part)
    if strides is not None:
        strides.clear()
        for value in _output_values(gm):
            strides.append(tuple(value.stride()) if isinstance(value, torch.Tensor) else None)
    outer = GraphModule(gm, outer)
    program = streams.executor_for(outer, example_inputs)
    if program is None:  # pragma: no cover - a request is raised only where one is needed
        raise AssertionError("op_sdk: a partitioned graph that needs no stream program")
    return StreamPartitionedCode(program, segments)
