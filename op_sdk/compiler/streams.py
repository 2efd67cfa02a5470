"""Multi-stream execution of a graph with TorchAir's air scope operators (op_sdk/_air.py).

A graph marks its streams with ``air.scope_enter(keys, values)`` / ``air.scope_exit()``:
the nodes between an enter whose keys hold ``_user_stream_label`` and its exit belong to
the stream named by that label's value (scopes nest; an enter without the label keeps the
enclosing stream; outside every scope a node is on the main stream, the caller's).
``air.record()`` is an event on its node's stream, ``air.wait([tokens])`` makes its
stream wait for those events, ``air.wait_tensor(t, dep)`` is ``t`` read after ``dep``;
``air.tagged_event_wait(tag)`` makes its stream wait for the last
``air.tagged_event_record(tag)`` before it in the graph (none: nothing to wait for, the
record of an earlier call or of eager code has completed), and ``air.record_tagged_stream``
changes nothing (the executors keep every tensor for the streams that use it).

``check(graph)`` rejects malformed scopes (an exit without an enter, an enter never
exited, a wait on something that is not a record or a record that comes after it, a node
that reads a value defined after it) with an error naming the node.

``plan(graph)`` assigns every node its stream and the nodes of other streams it must wait
for: its inputs computed on another stream, the records it waits for, and, for a node that
writes memory (a mutating schema, such as the ``copy_`` of an input mutation) and for the
graph output, everything issued before it on every stream. Each stream runs its nodes in
graph order, and every dependency points to an earlier node of the graph, so the program
cannot deadlock and computes what the single-stream graph computes.

Executors:

* CPU (``CpuStreamProgram``): each stream name has a worker thread of its own, shared by all
  graphs of the process, whose intra-op thread count is ``OP_SDK_STREAM_THREADS`` (default:
  half the process's, at least 1); the main stream runs on the calling thread, concurrently;
  a cross-stream dependency is a ``threading.Event``.
* CUDA (``CudaStreamProgram``): each stream name has a side stream per device; a
  cross-stream dependency is a CUDA event; a tensor used on a stream other than its
  producer's is ``record_stream``-ed on the consumer; the side streams fork from the
  caller's stream at the start and the caller's stream joins them at the end, which is also
  what a CUDA-graph capture needs.

Inductor (max-autotune) schedules a graph as one stream. A graph with several streams is
compiled as one Inductor partition per stream region, run by the executors above
(partitions.py); ``lower_for_inductor`` removes the scope operators of a graph whose scopes
name no second stream (``wait_tensor`` becomes a clone).
"""

from __future__ import annotations

import dataclasses
import os
import queue
import threading
from collections.abc import Sequence
from typing import Any

import torch
from torch.fx import Graph, GraphModule, Node

from op_sdk import _air
from op_sdk.scope import capped_threads, merged, regions

__all__ = ["ScopeError", "MAIN", "check", "stream_of", "has_streams", "plan", "StreamPlan",
           "CpuStreamProgram", "CudaStreamProgram", "lower_for_inductor", "stream_threads",
           "worker_threads", "writes", "is_scope_op", "thread_caps", "scope_attributes",
           "scope_regions", "executor_for", "needs_program", "on_cuda"]

MAIN = "main"                       # the caller's stream
LABEL = "_user_stream_label"

_ENTER, _EXIT, _RECORD, _WAIT, _WAIT_TENSOR = (
    "air.scope_enter.default", "air.scope_exit.default", "air.record.default",
    "air.wait.default", "air.wait_tensor.default")
_TAG_RECORD, _TAG_WAIT = "air.tagged_event_record.default", "air.tagged_event_wait.default"
_TAG_STREAM = ("air.record_tagged_stream.default", "air.record_tagged_stream_.default")
_TAGGED = (_TAG_RECORD, _TAG_WAIT) + _TAG_STREAM
_SCOPE_OPS = frozenset(_air.scope_op_names())    # the five above and the tagged ones


class ScopeError(RuntimeError):
    """The graph's air scopes are malformed."""


def _kind(node: Node) -> str:
    return str(node.target) if node.op == "call_function" else ""


def _keys_values(node: Node) -> tuple[list, list]:
    """An enter node's scope keys and values."""
    keys = node.kwargs.get("keys", node.args[0] if node.args else [])
    values = node.kwargs.get("values", node.args[1] if len(node.args) > 1 else [])
    return list(keys), list(values)


def _label(node: Node) -> str | None:
    """The stream an enter node switches to, or None when it carries no stream label."""
    keys, values = _keys_values(node)
    if len(keys) != len(values):
        raise ScopeError(f"op_sdk: {node.name} (torch.ops.air.scope_enter) has {len(keys)} keys "
                         f"{keys} but {len(values)} values {values}; they must pair up")
    if LABEL not in keys:
        return None
    value = values[keys.index(LABEL)]
    if not isinstance(value, str) or not value:
        raise ScopeError(f"op_sdk: {node.name} (torch.ops.air.scope_enter): the stream label "
                         f"{LABEL} must be a non-empty str, got {value!r}")
    return value


def _tag(node: Node) -> str:
    return node.kwargs.get("tag", node.args[0] if node.args else None)


def has_streams(graph: Graph) -> bool:
    return any(_kind(n) in _SCOPE_OPS for n in graph.nodes)


def check(graph: Graph) -> None:
    """Raise ``ScopeError`` naming the node when the scopes are not well-formed."""
    stack: list[Node] = []
    position = {n: i for i, n in enumerate(graph.nodes)}
    for node in graph.nodes:
        kind = _kind(node)
        for dep in node.all_input_nodes:
            if position.get(dep, -1) >= position[node]:
                raise ScopeError(f"op_sdk: {node.name} ({node.target}) reads {dep.name}, which "
                                 "is defined after it: the graph has a cycle or is out of order")
        if kind == _ENTER:
            _label(node)
            stack.append(node)
        elif kind == _EXIT:
            if not stack:
                raise ScopeError(f"op_sdk: {node.name} (torch.ops.air.scope_exit) has no "
                                 "torch.ops.air.scope_enter before it: enter and exit must pair up")
            stack.pop()
        elif kind == _WAIT:
            tokens = node.kwargs.get("x", node.args[0] if node.args else None)
            if not tokens:
                raise ScopeError(f"op_sdk: {node.name} (torch.ops.air.wait) waits for no token")
            for token in tokens:
                if not isinstance(token, Node) or _kind(token) != _RECORD:
                    raise ScopeError(f"op_sdk: {node.name} (torch.ops.air.wait) waits for "
                                     f"{getattr(token, 'name', token)!r}, which is not a "
                                     "torch.ops.air.record node")
        elif kind in (_TAG_RECORD, _TAG_WAIT):
            try:
                _air.check_tag(_tag(node), "record" if kind == _TAG_RECORD else "wait")
            except AssertionError as e:
                raise ScopeError(f"op_sdk: {node.name} ({node.target}): {e}") from None
    if stack:
        names = ", ".join(f"{n.name} {list(n.args[1]) if len(n.args) > 1 else ''}" for n in stack)
        raise ScopeError(f"op_sdk: torch.ops.air.scope_enter without a matching scope_exit: "
                         f"{names}")


CORE_LIMIT = "_op_aicore_num"      # limit_core_num's key: its region's thread cap on CPU


def scope_attributes(graph: Graph) -> dict[Node, dict[str, str]]:
    """Each operator's scope attributes (``op_sdk.scope.merged`` of the scopes around it);
    only the operators inside a scope that sets one."""
    out: dict[Node, dict[str, str]] = {}
    stack: list[dict[str, str]] = []
    for node in graph.nodes:
        kind = _kind(node)
        if kind == _ENTER:
            stack.append(dict(zip(*_keys_values(node))))
        elif kind == _EXIT:
            if stack:
                stack.pop()
        elif stack and node.op == "call_function" and kind not in _SCOPE_OPS:
            attrs = merged(stack)
            if attrs:
                out[node] = attrs
    return out


def thread_caps(graph: Graph) -> dict[Node, int]:
    """The operators inside a ``limit_core_num`` scope, each with its innermost scope's
    ``op_aicore_num``: the most intra-op threads it runs with on CPU."""
    return {n: int(a[CORE_LIMIT]) for n, a in scope_attributes(graph).items() if CORE_LIMIT in a}


def scope_regions(graph: Graph) -> dict[str, list[str]]:
    """TorchAir scope region (``op_sdk.scope.regions``'s name) -> its operators' names, in
    graph order: the compile report's "scopes"."""
    out: dict[str, list[str]] = {}
    for node, attrs in scope_attributes(graph).items():
        for region in regions(attrs):
            out.setdefault(region, []).append(node.name)
    return out


def stream_of(graph: Graph) -> dict[Node, str]:
    """Each node's stream (``MAIN`` outside the stream scopes); enter and exit nodes belong
    to the stream they open / close."""
    out: dict[Node, str] = {}
    stack: list[str] = []
    current = MAIN
    for node in graph.nodes:
        kind = _kind(node)
        if kind == _ENTER:
            stack.append(current)
            current = _label(node) or current
            out[node] = current
        elif kind == _EXIT:
            out[node] = current
            current = stack.pop() if stack else MAIN
        else:
            out[node] = current
    return out


def writes(node: Node) -> bool:
    """Whether the node writes memory: a mutating schema (such as the ``copy_`` of an input
    mutation), or a compiled partition holding one (partitions.py)."""
    if node.op != "call_function" or _kind(node) in _TAGGED:
        return False                   # record_tagged_stream_'s (a!) writes nothing
    if getattr(node.target, "op_sdk_writes", False):
        return True
    schema = getattr(node.target, "_schema", None)
    return schema is not None and schema.is_mutable


def is_scope_op(node: Node) -> bool:
    return _kind(node) in _SCOPE_OPS


@dataclasses.dataclass
class StreamPlan:
    """Who runs what: the graph's nodes per stream (graph order) and each node's
    cross-stream dependencies."""

    nodes: list[Node]
    stream: dict[Node, str]
    deps: dict[Node, list[Node]]       # nodes of other streams to wait for
    signals: set[Node]                 # nodes some other stream waits for
    streams: list[str]                 # MAIN first, then the side streams in order of appearance
    users: dict[Node, int] = dataclasses.field(default_factory=dict)  # node -> its users
    caps: dict[Node, int] = dataclasses.field(default_factory=dict)   # limit_core_num's

    def by_name(self) -> dict[str, str]:
        """Node name -> stream, for the graph's call_function nodes (the report's map)."""
        return {n.name: s for n, s in self.stream.items() if n.op == "call_function"}

    def by_stream(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {s: [] for s in self.streams}
        for n in self.nodes:
            out[self.stream[n]].append(n)
        return out


def plan(graph: Graph) -> StreamPlan:
    check(graph)
    stream = stream_of(graph)
    nodes = list(graph.nodes)
    streams = [MAIN] + [s for s in dict.fromkeys(stream.values()) if s != MAIN]
    last: dict[str, Node] = {}         # the last node issued so far on each stream
    deps: dict[Node, list[Node]] = {}
    barrier: Node | None = None        # the last node that writes memory
    after_barrier: dict[str, Node] = {}
    tagged: dict[str, Node] = {}       # the last tagged record of each tag so far
    for node in nodes:
        mine = stream[node]
        need: list[Node] = []
        if _kind(node) == _TAG_RECORD:
            tagged[_tag(node)] = node
        elif _kind(node) == _TAG_WAIT and _tag(node) in tagged:
            record = tagged[_tag(node)]
            if stream[record] != mine:
                need.append(record)
        if barrier is not None and stream[barrier] != mine and after_barrier.get(mine) is not barrier:
            need.append(barrier)       # what comes after a write sees it, on every stream
            after_barrier[mine] = barrier
        inputs = list(node.all_input_nodes)
        if _kind(node) == _WAIT:
            inputs = [t for t in inputs if _kind(t) == _RECORD]
        for dep in inputs:
            if stream[dep] != mine:
                need.append(dep)
        if node.op == "output" or writes(node):
            need.extend(n for s, n in last.items() if s != mine)
        deps[node] = list(dict.fromkeys(need))
        last[mine] = node
        if writes(node):
            barrier = node
    signals = {d for ds in deps.values() for d in ds}
    users = {n: len(n.users) for n in nodes if n.op != "output"}
    return StreamPlan(nodes, stream, deps, signals, streams, users, thread_caps(graph))


def _fetch(env: dict, arg):
    return torch.fx.node.map_arg(arg, lambda n: env[n])


def _run_node(node: Node, env: dict) -> None:
    if node.op == "call_function":
        kind = _kind(node)
        if kind in (_ENTER, _EXIT, _RECORD, _WAIT) + _TAGGED:
            # the executor does what they stand for; the token is an empty tensor
            env[node] = torch.empty(0) if kind == _RECORD else None
            return
        args, kwargs = _fetch(env, node.args), _fetch(env, node.kwargs)
        if kind == _WAIT_TENSOR:
            env[node] = args[0].clone()
            return
        env[node] = node.target(*args, **kwargs)
    elif node.op == "get_attr":
        target = node.graph.owning_module
        for atom in str(node.target).split("."):
            target = getattr(target, atom)
        env[node] = target
    else:
        raise AssertionError(f"{node.op} {node.name} cannot run on a side stream")


# -- CPU ------------------------------------------------------------------------------------

def stream_threads() -> int:
    """The intra-op thread count of each stream worker: ``OP_SDK_STREAM_THREADS``, or half
    the process's intra-op threads (at least 1)."""
    raw = os.environ.get("OP_SDK_STREAM_THREADS", "").strip()
    if raw:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(f"OP_SDK_STREAM_THREADS must be a positive integer, got {raw!r}")
        return value
    return max(1, torch.get_num_threads() // 2)


class _Worker:
    """One thread per stream name, running the jobs given to it in order."""

    def __init__(self, name: str):
        self.name = name
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        ready = threading.Event()
        self.threads = stream_threads()
        main_threads = torch.get_num_threads()
        self.thread = threading.Thread(target=self._loop, args=(ready,), daemon=True,
                                       name=f"op_sdk-stream-{name}")
        self.thread.start()
        ready.wait()
        # torch.set_num_threads in the worker also set the default of threads started later:
        # give that back (this thread's own count is unchanged)
        torch.set_num_threads(main_threads)

    def _loop(self, ready: threading.Event) -> None:
        # ATen sets a thread's OpenMP thread count lazily, on its first parallel call, from the
        # process default: do that first, or it would later undo this thread's own count
        torch.get_num_threads()
        torch.set_num_threads(self.threads)
        ready.set()
        while True:
            job = self.jobs.get()
            job()


_WORKERS: dict[str, _Worker] = {}
_WORKERS_LOCK = threading.Lock()


def _worker(name: str) -> _Worker:
    with _WORKERS_LOCK:
        worker = _WORKERS.get(name)
        if worker is None:
            worker = _WORKERS[name] = _Worker(name)
        return worker


def worker_threads() -> dict[str, int]:
    """Stream name -> the ident of its worker thread (the workers started so far)."""
    with _WORKERS_LOCK:
        return {name: w.thread.ident for name, w in _WORKERS.items()}


_ENQUEUE_LOCK = threading.Lock()


class _Call:
    """The state of one run of a CPU stream program."""

    def __init__(self, signals, users):
        self.env: dict[Node, Any] = {}
        self.done = {n: threading.Event() for n in signals}
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.users = dict(users)       # users not run yet, per value

    def release(self, node: Node) -> None:
        """``node`` ran: drop each input value whose users all ran (the memory of
        intermediates goes back as the single-stream executor gives it back)."""
        for dep in node.all_input_nodes:
            with self.lock:
                left = self.users[dep] = self.users[dep] - 1
            if left == 0:
                self.env.pop(dep, None)

    def fail(self, exc: BaseException) -> None:
        with self.lock:
            if self.error is None:
                self.error = exc
        for event in self.done.values():  # wake every waiter: they see the error
            event.set()


class CpuStreamProgram:
    """Runs a graph's streams concurrently on CPU: the main stream on the calling thread,
    each side stream on its worker."""

    def __init__(self, gm: GraphModule, stream_plan: StreamPlan | None = None):
        self.gm = gm
        self.plan = stream_plan or plan(gm.graph)
        per_stream = self.plan.by_stream()
        self.main = per_stream.pop(MAIN)
        self.side = per_stream
        self._boxed_call = True

    def __call__(self, args: list) -> Any:
        from torch.profiler import record_function

        p = self.plan
        call = _Call(p.signals, p.users)
        placeholders = [n for n in self.main if n.op == "placeholder"]
        for node, value in zip(placeholders, args):
            call.env[node] = value
        args.clear()  # boxed calling convention: the graph owns its inputs now
        grad = torch.is_grad_enabled()
        finished = []
        workers = [(_worker(name), name, nodes) for name, nodes in self.side.items()]
        # One run's jobs enter all its workers' queues at once: runs from several threads
        # are then queued in the same order on every worker, so a job never waits behind a
        # later run's job that waits for it (which, with streams that wait for each other,
        # would deadlock)
        with _ENQUEUE_LOCK:
            for worker, name, nodes in workers:
                end = threading.Event()
                finished.append(end)
                worker.jobs.put(self._job(name, nodes, call, end, grad))
        try:
            with record_function("op_sdk.stream:main"):
                for node in self.main:
                    if node.op == "placeholder":
                        self._signal(call, node)
                        continue
                    self._wait(call, node)
                    if node.op == "output":
                        for end in finished:
                            end.wait()
                        self._raise(call)
                        return _fetch(call.env, node.args[0])
                    with capped_threads(p.caps.get(node)):
                        _run_node(node, call.env)
                    self._signal(call, node)
                    call.release(node)
        except BaseException as exc:
            call.fail(exc)
            for end in finished:
                end.wait()
            if call.error is not exc:  # a worker failed first: its error is the one to see
                raise call.error from None
            raise
        raise AssertionError("the graph has no output node")

    def _job(self, name, nodes, call: _Call, end: threading.Event, grad: bool):
        def job():
            from torch.profiler import record_function

            try:
                with torch.set_grad_enabled(grad), record_function(f"op_sdk.stream:{name}"):
                    for node in nodes:
                        self._wait(call, node)
                        with capped_threads(self.plan.caps.get(node)):
                            _run_node(node, call.env)
                        self._signal(call, node)
                        call.release(node)
            except BaseException as exc:
                call.fail(exc)
            finally:
                end.set()
        return job

    def _wait(self, call: _Call, node: Node) -> None:
        for dep in self.plan.deps[node]:
            call.done[dep].wait()
        if call.error is not None:
            raise _Aborted(f"another stream of this run failed: {call.error}")

    @staticmethod
    def _signal(call: _Call, node: Node) -> None:
        event = call.done.get(node)
        if event is not None:
            event.set()

    @staticmethod
    def _raise(call: _Call) -> None:
        if call.error is not None:
            raise call.error


class _Aborted(RuntimeError):
    """Another stream of the same run failed; its error is the one raised."""


# -- CUDA -----------------------------------------------------------------------------------

_CUDA_STREAMS: dict[tuple[str, int], Any] = {}


def cuda_stream(name: str, device: torch.device):
    """The side stream named ``name`` on ``device`` (made once, then reused)."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (name, index)
    with _WORKERS_LOCK:
        stream = _CUDA_STREAMS.get(key)
        if stream is None:
            stream = _CUDA_STREAMS[key] = torch.cuda.Stream(device=index)
        return stream


class CudaStreamProgram:
    """Runs a graph's streams as CUDA streams, issued in graph order from the calling
    thread."""

    def __init__(self, gm: GraphModule, device: torch.device,
                 stream_plan: StreamPlan | None = None):
        self.gm = gm
        self.device = device
        self.plan = stream_plan or plan(gm.graph)
        self._boxed_call = True

    def __call__(self, args: list) -> Any:
        p = self.plan
        main = torch.cuda.current_stream(self.device)
        streams = {MAIN: main}
        for name in p.streams[1:]:
            streams[name] = cuda_stream(name, self.device)
        fork = main.record_event()
        for name in p.streams[1:]:
            streams[name].wait_event(fork)   # the inputs were made on the caller's stream
        env: dict[Node, Any] = {}
        events: dict[Node, Any] = {}
        placeholders = [n for n in p.nodes if n.op == "placeholder"]
        for node, value in zip(placeholders, args):
            env[node] = value
        args.clear()
        for node in p.nodes:
            if node.op == "placeholder":
                if node in p.signals:
                    events[node] = fork
                continue
            stream = streams[p.stream[node]]
            for dep in p.deps[node]:
                stream.wait_event(events[dep])
            if node.op == "output":
                for dep in node.all_input_nodes:
                    if p.stream[dep] != MAIN:
                        _record_stream(env.get(dep), main)  # the caller uses them on its stream
                return _fetch(env, node.args[0])
            with torch.cuda.stream(stream):
                for dep in node.all_input_nodes:
                    if p.stream[dep] != p.stream[node]:
                        _record_stream(env.get(dep), stream)
                _run_node(node, env)
            if node in p.signals:
                events[node] = stream.record_event()
        raise AssertionError("the graph has no output node")


def _record_stream(value, stream) -> None:
    """The caching allocator must not reuse ``value``'s memory before ``stream`` is done
    with it."""
    if isinstance(value, torch.Tensor):
        if value.is_cuda:
            value.record_stream(stream)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _record_stream(v, stream)


# -- Inductor -------------------------------------------------------------------------------

def lower_for_inductor(graph: Graph) -> None:
    """Remove the (checked) scopes for Inductor, which runs the graph as one stream
    (``wait_tensor`` becomes a clone)."""
    if not has_streams(graph):
        return
    for node in list(graph.nodes):
        kind = _kind(node)
        if kind == _WAIT_TENSOR:
            with graph.inserting_before(node):
                clone = graph.call_function(torch.ops.aten.clone.default, (node.args[0],))
            clone.meta.update(node.meta)
            node.replace_all_uses_with(clone)
            graph.erase_node(node)
    for node in reversed(list(graph.nodes)):
        if _kind(node) in (_ENTER, _EXIT, _WAIT) + _TAGGED:
            graph.erase_node(node)
    for node in reversed(list(graph.nodes)):
        if _kind(node) == _RECORD:
            if node.users:
                raise ScopeError(f"op_sdk: {node.name} (torch.ops.air.record) is read by "
                                 f"{', '.join(u.name for u in node.users)}, not only by "
                                 "torch.ops.air.wait")
            graph.erase_node(node)


def on_cuda(values: Sequence[Any]) -> torch.device | None:
    return next((x.device for x in values
                 if isinstance(x, torch.Tensor) and x.device.type == "cuda"), None)


def needs_program(p: StreamPlan, cuda: bool) -> bool:
    """Whether a graph with this plan runs on a stream program: it has several streams, or,
    on CPU, ``limit_core_num`` regions (their thread caps)."""
    return len(p.streams) > 1 or (bool(p.caps) and not cuda)


def executor_for(gm: GraphModule, example_inputs: Sequence[Any]):
    """The stream program for ``gm`` (None when it has no stream scope, or one stream and,
    on CPU, no thread cap)."""
    if not has_streams(gm.graph):
        return None
    p = plan(gm.graph)
    cuda = on_cuda(example_inputs)
    if not needs_program(p, cuda is not None):
        return None
    if cuda is not None:
        return CudaStreamProgram(gm, cuda, p)
    return CpuStreamProgram(gm, p)
