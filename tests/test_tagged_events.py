"""TorchAir's tagged events (torchair.ops.npu_create_tagged_event / npu_tagged_event_record /
npu_tagged_event_wait / npu_record_tagged_stream) on op_sdk's stream executors: a tagged
wait orders its stream after the last record of its tag in the graph, in both directions
and in every mode; TorchAir's example model gives the eager result; the checks and words;
what a graph without a record, a single-stream graph and the GE conversion do."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import op_sdk as torchair
from op_sdk import _air
from op_sdk.compiler import streams
from op_sdk.scope import npu_stream_switch
from tests.test_multistream import MODES, _compile, _same

_LOG: list[str] = []
_LOCK = threading.Lock()
_lib = torch.library.Library("op_sdk_tagtest", "DEF")  # noqa: TOR901
_lib.define("slow(Tensor x, str name) -> Tensor")
_lib.define("mark(Tensor x, str name) -> Tensor")


def _slow(x, name):
    time.sleep(0.1)
    return _mark(x, name)


def _mark(x, name):
    with _LOCK:
        _LOG.append(name)
    return x.clone()


for _name, _fn in (("slow", _slow), ("mark", _mark)):
    _lib.impl(_name, _fn, "CPU")
    torch.library.register_fake(f"op_sdk_tagtest::{_name}", lambda x, n: torch.empty_like(x), lib=_lib)

T = torch.ops.op_sdk_tagtest


def _event(tag):
    """A tagged event of this test module (tags are process-wide, made once)."""
    return _air._TAGGED.get(tag) or torchair.ops.npu_create_tagged_event(tag)


@pytest.mark.parametrize("mode", MODES)
def test_main_waits_for_the_side_streams_record(mode):
    done = _event("tagtest_side_done")

    def fn(x):
        with npu_stream_switch("tagtest_side"):
            y = T.slow(x, "side")
            torchair.ops.npu_tagged_event_record(done)
        torchair.ops.npu_tagged_event_wait(done)
        return y, T.mark(x, "main_after_wait")        # no data dependency on y

    opt, _ = _compile(fn, mode)
    for _ in range(5):
        _LOG.clear()
        x = torch.randn(16)
        y, z = opt(x)
        assert _LOG == ["side", "main_after_wait"]
        assert _same(y, x, mode) and _same(z, x, mode)


@pytest.mark.parametrize("mode", MODES)
def test_side_stream_waits_for_the_mains_record(mode):
    ready = _event("tagtest_main_ready")

    def fn(x):
        a = T.slow(x, "main")
        torchair.ops.npu_tagged_event_record(ready)
        with npu_stream_switch("tagtest_side2"):
            torchair.ops.npu_tagged_event_wait(ready)
            b = T.mark(x, "side_after_wait")          # reads x, not a
        return a, b

    opt, _ = _compile(fn, mode)
    for _ in range(5):
        _LOG.clear()
        a, b = opt(torch.randn(16))
        assert _LOG == ["main", "side_after_wait"]


def test_without_the_wait_the_streams_do_not_wait():
    """The test above can fail: without the tagged wait the side stream runs first."""
    def fn(x):
        a = T.slow(x, "main")
        with npu_stream_switch("tagtest_side3"):
            b = T.mark(x, "side_no_wait")
        return a, b

    opt, _ = _compile(fn)
    _LOG.clear()
    opt(torch.randn(16))
    assert _LOG == ["side_no_wait", "main"]


def _graph(*steps):
    """A hand-made graph: ("record" | "wait", tag, stream) and ("op", name, stream) steps."""
    g = torch.fx.Graph()
    x = g.placeholder("x")
    outs, nodes = [], {}
    for kind, name, stream in steps:
        if stream != "main":
            g.call_function(torch.ops.air.scope_enter.default, (["_user_stream_label"], [stream]))
        if kind == "op":
            node = g.call_function(T.mark.default, (x, name))
            outs.append(node)
        else:
            target = torch.ops.air.tagged_event_record if kind == "record" else torch.ops.air.tagged_event_wait
            node = g.call_function(target.default, (name,))
        nodes[(kind, name, stream)] = node
        if stream != "main":
            g.call_function(torch.ops.air.scope_exit.default, ())
    g.output(tuple(outs))
    return torch.fx.GraphModule(torch.nn.Module(), g), nodes


def test_a_wait_depends_on_the_last_record_of_its_tag_before_it():
    _event("tagtest_plan")
    gm, n = _graph(("wait", "tagtest_plan", "s"),            # no record before it: no wait
                   ("record", "tagtest_plan", "main"),
                   ("record", "tagtest_plan", "main"),
                   ("wait", "tagtest_plan", "s2"),
                   ("record", "tagtest_plan", "s"))
    p = streams.plan(gm.graph)
    waits = [node for node in gm.graph.nodes if node.target is torch.ops.air.tagged_event_wait.default]
    records = [node for node in gm.graph.nodes if node.target is torch.ops.air.tagged_event_record.default]
    assert p.deps[waits[0]] == []
    assert p.deps[waits[1]] == [records[1]]                   # the last one, not the first
    assert not any(records[0] in d for d in p.deps.values())
    program = streams.executor_for(gm, [torch.zeros(1)])
    assert isinstance(program, streams.CpuStreamProgram)
    program([torch.zeros(1)])


def test_an_unknown_tag_in_a_graph_is_rejected_naming_the_node():
    gm, _ = _graph(("op", "a", "s"), ("record", "tagtest_never_created", "s"))
    with pytest.raises(streams.ScopeError, match="tagged_event_record.*tagtest_never_created.*"
                                                 "npu_create_tagged_event"):
        streams.plan(gm.graph)


def test_eager_calls_check_and_change_nothing():
    e = _event("tagtest_eager")
    x = torch.randn(4)
    assert torchair.ops.npu_tagged_event_record(e) is None
    assert torchair.ops.npu_tagged_event_wait(e) is None
    assert torchair.ops.npu_record_tagged_stream(x, "default") is None
    with pytest.raises(ValueError, match="tagged event tag tagtest_eager is already in use"):
        torchair.ops.npu_create_tagged_event("tagtest_eager")
    with pytest.raises(TypeError, match="tag must be a str"):
        torchair.ops.npu_create_tagged_event(3)
    with pytest.raises(ValueError, match="is not in use"):
        torchair.ops.npu_tagged_event_record(object())
    with pytest.raises(AssertionError, match="tagged event is None while tag is nope, tagged "
                                             "event wait failed"):
        torch.ops.air.tagged_event_wait("nope")


def test_dead_code_elimination_keeps_them():
    gm, _ = _graph(("record", "tagtest_plan", "main"), ("wait", "tagtest_plan", "main"))
    before = len(gm.graph.nodes)
    gm.graph.eliminate_dead_code()
    assert len(gm.graph.nodes) == before


class DsModel2(torch.nn.Module):
    """TorchAir's own example (tests/smoke/aclgraph_test.py), unchanged but for the tags."""

    def __init__(self):
        super().__init__()
        self.event1 = _event("tagtest_66")
        self.event2 = _event("tagtest_77")

    def forward(self, x1, x2):
        y = torch.matmul(x1, x2)
        torchair.ops.npu_tagged_event_record(self.event1)
        with torchair.scope.npu_stream_switch('2', 3):
            torchair.ops.npu_tagged_event_wait(self.event1)
            output = torch.transpose(y, 1, 0)
            torchair.ops.npu_tagged_event_record(self.event2)
            torchair.ops.npu_record_tagged_stream(output, '2')
        torchair.ops.npu_tagged_event_wait(self.event2)
        return output


@pytest.mark.parametrize("mode", MODES)
def test_torchairs_example_gives_the_eager_result(mode):
    model = DsModel2()
    x1, x2 = torch.randn(64, 4, 512), torch.randn(64, 512, 128)
    opt, backend = _compile(model, mode)
    assert torch.allclose(opt(x1, x2), model(x1, x2), atol=1e-4, rtol=1e-4)
    graph = torchair.explain(backend).reports[-1].graphs[0]
    assert "2" in set(graph.streams.values())
    if mode == "max-autotune":
        assert graph.executor.endswith("+streams")


def test_single_stream_graph_under_inductor_drops_them():
    e = _event("tagtest_single")

    def fn(x):
        y = x.sin()
        torchair.ops.npu_tagged_event_record(e)
        torchair.ops.npu_tagged_event_wait(e)
        torchair.ops.npu_record_tagged_stream(y, "default")
        return y * 2

    opt, backend = _compile(fn, "max-autotune")
    x = torch.randn(8)
    assert torch.allclose(opt(x), x.sin() * 2)
    assert torchair.explain(backend).reports[-1].graphs[0].executor in ("inductor", "inductor-cpp")


def test_ge_conversion_makes_the_tagged_wait_a_control_edge():
    from op_sdk.converters import convert_fx

    _event("tagtest_ge")
    g = torch.fx.Graph()
    x = g.placeholder("x")
    x.meta["val"] = torch.empty(4)
    a = g.call_function(torch.ops.aten.neg.default, (x,))
    g.call_function(torch.ops.air.tagged_event_record.default, ("tagtest_ge",))
    g.call_function(torch.ops.air.scope_enter.default, (["_user_stream_label"], ["s"]))
    g.call_function(torch.ops.air.tagged_event_wait.default, ("tagtest_ge",))
    b = g.call_function(torch.ops.aten.rsqrt.default, (x,))
    g.call_function(torch.ops.air.record_tagged_stream_.default, (b, "s"))
    g.call_function(torch.ops.air.scope_exit.default, ())
    g.output((a, b))
    for n in (a, b):
        n.meta["val"] = torch.empty(4)
    ge = convert_fx(torch.fx.GraphModule(torch.nn.Module(), g))
    neg = next(op for op in ge.ops if op.type == "Neg")
    abs_ = next(op for op in ge.ops if op.type == "Rsqrt")
    assert f"{neg.name}:-1" in abs_.inputs
    assert abs_.attrs["_user_stream_label"] == ("String", "s")
