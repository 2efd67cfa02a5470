"""Multi-stream execution (TorchAir's air scope operators): eager semantics, the manual's
custom-pass example in every mode and slot, the well-formedness check, the CPU workers
(threads, concurrency, ordering, errors) and the compile report."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import op_sdk
from op_sdk.compiler import streams
from op_sdk.scope import npu_stream_switch, npu_wait_tensor

# -- test operators: record the thread they ran on; block until another op ran ------------

_LOG: list[tuple[str, int]] = []
_LOG_LOCK = threading.Lock()
_GATE = threading.Event()
_lib = torch.library.Library("op_sdk_mstest", "DEF")  # noqa: TOR901
_lib.define("tid(Tensor x, str tag) -> Tensor")
_lib.define("gate_wait(Tensor x) -> Tensor")
_lib.define("gate_open(Tensor x) -> Tensor")
_lib.define("boom(Tensor x) -> Tensor")
_lib.define("started_then_wait(Tensor x) -> Tensor")
_lib.define("open_once_started(Tensor x) -> Tensor")
_STARTED = threading.Event()


def _tid(x, tag):
    with _LOG_LOCK:
        _LOG.append((tag, threading.get_ident()))
    return x.clone()


def _gate_wait(x):
    if not _GATE.wait(timeout=20):
        raise RuntimeError("gate_wait: gate_open never ran while gate_wait blocked: "
                           "the streams did not run concurrently")
    return x.clone()


def _gate_open(x):
    _GATE.set()
    return x.clone()


def _boom(x):
    raise ValueError("boom on purpose")


def _started_then_wait(x):
    _STARTED.set()
    return _gate_wait(x)


def _open_once_started(x):
    # runs while started_then_wait runs: the two overlap in time, whatever the scheduling
    if not _STARTED.wait(timeout=20):
        raise RuntimeError("open_once_started: started_then_wait never started")
    return _gate_open(x)


for _name, _fn in (("tid", _tid), ("gate_wait", _gate_wait), ("gate_open", _gate_open),
                   ("boom", _boom), ("started_then_wait", _started_then_wait),
                   ("open_once_started", _open_once_started)):
    _lib.impl(_name, _fn, "CPU")
    torch.library.register_fake(f"op_sdk_mstest::{_name}",
                                (lambda x, *a: torch.empty_like(x)), lib=_lib)

T = torch.ops.op_sdk_mstest


@pytest.fixture(autouse=True)
def _no_compile_caches():
    # the report is written by the passes, which a cache hit skips
    from torch._functorch import config as fconfig
    from torch._inductor import config as iconfig

    with iconfig.patch(fx_graph_cache=False), fconfig.patch(enable_autograd_cache=False):
        yield


def _compile(fn, mode="reduce-overhead", **slots):
    cfg = op_sdk.CompilerConfig()
    if mode != "max-autotune":
        cfg.mode = mode
    for slot, fn_pass in slots.items():
        setattr(cfg, slot, fn_pass)
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    torch._dynamo.reset()
    return torch.compile(fn, backend=backend, dynamic=False), backend


# -- the operators -------------------------------------------------------------------------

def test_schemas_are_torchairs():
    assert str(torch.ops.air.scope_enter.default._schema) == \
        "air::scope_enter(str[] keys, str[] values, bool need_execute=False) -> NoneType"
    assert str(torch.ops.air.scope_exit.default._schema) == \
        "air::scope_exit(bool need_execute=False) -> NoneType"
    assert str(torch.ops.air.record.default._schema) == \
        "air::record(*, Device? device=None) -> Tensor"
    assert str(torch.ops.air.wait.default._schema) == "air::wait(Tensor[] x) -> ()"
    assert str(torch.ops.air.wait_tensor.default._schema) == \
        "air::wait_tensor(Tensor self, Tensor dependency) -> Tensor"


def test_air_scope_ops_are_not_operators_of_the_registry():
    """The scope and event operators are the executors' (op_sdk/_air.py), not operators with
    kernels: the registry holds none of them (its air:: operators are TorchAir's forms of
    computing operators, npu_fused_infer_attention_score's)."""
    from op_sdk import _air

    names = set(_air.AIR_SCOPE_OPS + _air.AIR_EVENT_OPS) | {"print"}
    assert not [o for o in op_sdk.registered_ops() if o.namespace == "air" and o.name in names]
    assert {o.name for o in op_sdk.registered_ops() if o.namespace == "air"} == {
        "npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2"}


def test_dead_code_elimination_keeps_the_scope_operators():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.call_function(torch.ops.air.scope_enter.default, (["_user_stream_label"], ["s"]))
    y = g.call_function(torch.ops.aten.neg.default, (x,))
    rec = g.call_function(torch.ops.air.record.default, ())
    g.call_function(torch.ops.air.scope_exit.default, ())
    g.call_function(torch.ops.air.wait.default, ([rec],))
    g.output(y)
    before = [n.target for n in g.nodes]
    g.eliminate_dead_code()
    assert [n.target for n in g.nodes] == before


def test_eager_semantics_are_in_order_and_unchanged():
    x, w = torch.randn(8, 8), torch.randn(8, 8)
    with npu_stream_switch("s1", 1):
        y = torch.relu(x @ w)
    token = op_sdk.ops.record()
    op_sdk.ops.wait([token])
    z = npu_wait_tensor(x.sin(), y)
    assert torch.equal(z, x.sin()) and torch.equal(y, torch.relu(x @ w))
    assert z.data_ptr() != x.data_ptr()
    with pytest.raises(ValueError, match="at least one token"):
        op_sdk.ops.wait([])
    with pytest.raises(TypeError, match="stream_tag"):
        npu_stream_switch("")
    with pytest.raises(ValueError, match="pair up"):
        torch.ops.air.scope_enter(["a", "b"], ["x"])


# -- the manual's example (shared/seeds 002) -------------------------------------------------

class _SeedModel(torch.nn.Module):
    def forward(self, x):
        mm = torch.mm(x, x)
        abs = torch.abs(mm)
        add = torch.add(abs, 1)
        sub = torch.sub(x, mm)
        return add, sub


def _seed_pass(gm, example_inputs, config):
    fx_graph = gm.graph
    for node in fx_graph.nodes:
        if node.op == "call_function" and node.target == torch.ops.aten.mm.default:
            with fx_graph.inserting_before(node):
                fx_graph.call_function(torch.ops.air.scope_enter.default,
                                       args=(["_user_stream_label"], ["stream_1"]))
        if node.op == "call_function" and node.target == torch.ops.aten.abs.default:
            with fx_graph.inserting_after(node):
                record_node = fx_graph.call_function(torch.ops.air.record.default, args=())
            with fx_graph.inserting_after(record_node):
                fx_graph.call_function(torch.ops.air.scope_exit.default, args=())
        if node.op == "call_function" and node.target == torch.ops.aten.sub.Tensor:
            with fx_graph.inserting_before(node):
                fx_graph.call_function(torch.ops.air.wait.default, args=([record_node],))


@pytest.mark.parametrize("slot", ["post_grad_custom_pre_pass", "post_grad_custom_post_pass"])
@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_manual_example_gives_the_eager_result(mode, slot):
    model = _SeedModel()
    opt, backend = _compile(model, mode, **{slot: _seed_pass})
    for _ in range(3):
        x = torch.randn(3, 3)
        out, ref = opt(x), model(x)
        for a, b in zip(out, ref):
            torch.testing.assert_close(a, b)
            if mode == "reduce-overhead":
                assert torch.equal(a, b)
    graph = op_sdk.explain(backend).reports[-1].graphs[0]
    by_stream = graph.nodes_by_stream()
    assert by_stream["stream_1"][0].startswith("scope_enter")
    assert [n for n in by_stream["stream_1"] if n.startswith(("mm", "abs"))] == ["mm", "abs_1"]
    assert any(n.startswith("wait") for n in by_stream["main"])
    assert "sub" in by_stream["main"] and "add" in by_stream["main"]


# -- malformed scopes ----------------------------------------------------------------------

def _insert(kind):
    def bad(gm, example_inputs, config):
        g = gm.graph
        first = next(n for n in g.nodes if n.op == "call_function")
        with g.inserting_before(first):
            if kind == "exit_only":
                g.call_function(torch.ops.air.scope_exit.default, ())
            elif kind == "enter_only":
                g.call_function(torch.ops.air.scope_enter.default,
                                (["_user_stream_label"], ["lonely"]))
            elif kind == "wait_on_tensor":
                g.call_function(torch.ops.air.wait.default, ([first.args[0]],))
            elif kind == "unpaired_keys":
                g.call_function(torch.ops.air.scope_enter.default,
                                (["_user_stream_label", "x"], ["s"]))
                g.call_function(torch.ops.air.scope_exit.default, ())
    return bad


@pytest.mark.parametrize("kind, message", [
    ("exit_only", r"scope_exit\w* \(torch.ops.air.scope_exit\) has no torch.ops.air.scope_enter"),
    ("enter_only", r"scope_enter without a matching scope_exit: scope_enter\w* \['lonely'\]"),
    ("wait_on_tensor", r"wait\w* \(torch.ops.air.wait\) waits for 'arg0_1', which is not a "
                       r"torch.ops.air.record"),
    ("unpaired_keys", r"scope_enter\w* \(torch.ops.air.scope_enter\) has 2 keys"),
])
def test_malformed_scopes_are_rejected_naming_the_node(kind, message):
    opt, _ = _compile(lambda x: (x + 1).sin(), post_grad_custom_pre_pass=_insert(kind))
    with pytest.raises(Exception, match=message) as info:
        opt(torch.randn(4))
    assert "post_grad_custom_pre_pass" in str(info.value)


def test_a_node_reading_a_later_node_is_a_cycle():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    a = g.call_function(torch.ops.aten.neg.default, (x,))
    b = g.call_function(torch.ops.aten.sin.default, (a,))
    g.output(b)
    a.args = (b,)  # a reads b, b reads a
    with pytest.raises(streams.ScopeError, match=r"neg_default \(aten.neg.default\) reads sin_default, which is "
                                                 r"defined after it"):
        streams.check(g)


def test_wait_before_its_record_is_rejected():
    g = torch.fx.Graph()
    x = g.placeholder("x")
    w = g.call_function(torch.ops.air.wait.default, ([x],))
    rec = g.call_function(torch.ops.air.record.default, ())
    w.args = ([rec],)
    g.output(x)
    with pytest.raises(streams.ScopeError, match=r"wait_default \(air.wait.default\) reads record_default, which "
                                                 r"is defined after it"):
        streams.check(g)


# -- CPU execution ---------------------------------------------------------------------------
# reduce-overhead runs the graph's nodes on the stream executor; max-autotune runs one
# Inductor partition per stream region on it

MODES = ["reduce-overhead", "max-autotune"]


def _same(a, b, mode) -> bool:
    """Bit-equal where the graph runs as captured; within float tolerance where Inductor
    generated the code (its vectorised cos / tanh differ from ATen's by an ulp)."""
    if mode == "reduce-overhead":
        return torch.equal(a, b)
    torch.testing.assert_close(a, b)
    return True

def _threads_model(x):
    a = T.tid(x, "main_before")
    with npu_stream_switch("side_a"):
        b = T.tid(x, "side_a")
    with npu_stream_switch("side_b"):
        c = T.tid(x, "side_b")
    d = T.tid(x, "main_after")
    return a + b + c + d


@pytest.mark.parametrize("mode", MODES)
def test_each_stream_runs_on_its_own_worker_thread(mode):
    opt, backend = _compile(_threads_model, mode)
    x = torch.randn(16)
    _LOG.clear()
    out = opt(x)
    assert _same(out, 4 * x, mode)
    threads = dict(_LOG)
    main = threading.get_ident()
    workers = streams.worker_threads()
    assert threads["main_before"] == main and threads["main_after"] == main
    assert threads["side_a"] == workers["side_a"] != main
    assert threads["side_b"] == workers["side_b"] not in (main, workers["side_a"])
    # the workers are reused by the next call and by other graphs
    _LOG.clear()
    opt(x)
    assert dict(_LOG)["side_a"] == workers["side_a"]


@pytest.mark.parametrize("mode", MODES)
def test_the_streams_run_concurrently(mode):
    # gate_wait, first in graph order, blocks until gate_open (on the main stream) runs:
    # run in order on one thread, this fails after its timeout
    def fn(x):
        with npu_stream_switch("gate"):
            a = T.gate_wait(x)
        b = T.gate_open(x * 2)
        return a, b

    opt, _ = _compile(fn, mode)
    for _ in range(20):
        _GATE.clear()
        x = torch.randn(8)
        a, b = opt(x)
        assert _same(a, x, mode) and _same(b, x * 2, mode)


@pytest.mark.parametrize("mode", MODES)
def test_record_and_wait_order_the_streams_many_times(mode):
    def fn(x):
        with npu_stream_switch("producer"):
            y = T.tid(x.cos(), "side_work")
            token = torch.ops.air.record()
        torch.ops.air.wait([token])
        z = T.tid(x.sin(), "after_wait")
        return y, z

    opt, _ = _compile(fn, mode)
    for _ in range(100):
        _LOG.clear()
        x = torch.randn(32)
        y, z = opt(x)
        assert [tag for tag, _ in _LOG] == ["side_work", "after_wait"]
        assert _same(y, x.cos(), mode) and _same(z, x.sin(), mode)


@pytest.mark.parametrize("mode", MODES)
def test_data_dependencies_across_streams_are_waited_for_many_times(mode):
    def fn(x, w):
        with npu_stream_switch("s1"):
            h = torch.relu(x @ w)
            h = h @ w
        with npu_stream_switch("s2"):
            g = torch.tanh(x @ w.t())
        y = (x * 3).sum(-1, keepdim=True)
        return h + g + y, npu_wait_tensor(y, h)

    opt, _ = _compile(fn, mode)
    x, w = torch.randn(64, 64), torch.randn(64, 64)
    ref = fn(x, w)
    for _ in range(50):
        out = opt(x, w)
        for a, b in zip(out, ref):
            assert _same(a, b, mode)


@pytest.mark.parametrize("mode", MODES)
def test_an_error_on_a_side_stream_reaches_the_caller_and_the_worker_survives(mode):
    def fn(x, fail: bool):
        with npu_stream_switch("fails"):
            y = T.boom(x) if fail else x.neg()
        return y + x.sin()

    bad, _ = _compile(lambda x: fn(x, True), mode)
    # Inductor's C++ wrapper reports a failed operator by name, without its message
    error, message = ((ValueError, "boom on purpose") if mode == "reduce-overhead" else
                      ((ValueError, RuntimeError), "boom"))
    with pytest.raises(error, match=message):
        bad(torch.randn(4))
    good, _ = _compile(lambda x: fn(x, False), mode)
    x = torch.randn(4)
    assert _same(good(x), x.neg() + x.sin(), mode)


@pytest.mark.parametrize("mode", MODES)
def test_grad_mode_and_training_graphs(mode):
    w = torch.randn(8, 8, requires_grad=True)

    def fn(x):
        with npu_stream_switch("train"):
            y = torch.tanh(x @ w)
        return (y * x.sin()).sum()

    opt, _ = _compile(fn, mode)
    x = torch.randn(8, 8)
    loss = opt(x)
    loss.backward()
    g1 = w.grad.clone()
    w.grad = None
    fn(x).backward()
    torch.testing.assert_close(g1, w.grad)


@pytest.mark.parametrize("mode", MODES)
def test_input_mutation_waits_for_the_side_streams(mode):
    def fn(x, buf):
        with npu_stream_switch("reader"):
            y = T.tid(buf * 2, "read")
        buf.add_(1)
        return y

    opt, _ = _compile(fn, mode)
    for _ in range(30):
        buf = torch.randn(1024)
        before = buf.clone()
        y = opt(torch.randn(4), buf)
        assert _same(y, before * 2, mode) and _same(buf, before + 1, mode)


def test_stream_threads_env_var_sets_the_workers_intra_op_threads():
    code = textwrap.dedent("""
        import torch, op_sdk
        from op_sdk.compiler import streams
        torch.set_num_threads(2)
        seen = {}
        def probe(x):
            seen["worker"] = torch.get_num_threads()
            return x.clone()
        lib = torch.library.Library("probe_ns", "DEF")
        lib.define("probe(Tensor x) -> Tensor")
        lib.impl("probe", probe, "CPU")
        torch.library.register_fake("probe_ns::probe", lambda x: torch.empty_like(x), lib=lib)
        def fn(x):
            with op_sdk.scope.npu_stream_switch("s"):
                y = torch.ops.probe_ns.probe(x)
            return y + 1
        cfg = op_sdk.CompilerConfig(); cfg.mode = "reduce-overhead"
        out = torch.compile(fn, backend=op_sdk.get_npu_backend(compiler_config=cfg))(torch.ones(3))
        print(seen["worker"], torch.get_num_threads(), out.tolist())
    """)
    env = dict(os.environ, OP_SDK_STREAM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[:2] == ["1", "2"], out.stdout
    env["OP_SDK_STREAM_THREADS"] = "zero"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, env=env)
    assert out.returncode != 0 and "OP_SDK_STREAM_THREADS must be a positive integer" in out.stderr


# -- max-autotune, report ---------------------------------------------------------------------

def test_max_autotune_keeps_model_code_scopes_and_reports_the_streams():
    def fn(x, w):
        with npu_stream_switch("s1"):
            y = torch.relu(x @ w)
        z = npu_wait_tensor(x.sin(), y)
        return y + z

    opt, backend = _compile(fn, "max-autotune")
    x, w = torch.randn(16, 16), torch.randn(16, 16)
    torch.testing.assert_close(opt(x, w), fn(x, w))
    graph = op_sdk.explain(backend).reports[-1].graphs[0]
    assert graph.executor.startswith("inductor") and graph.executor.endswith("+streams")
    assert graph.nodes_by_stream()["s1"] == ["scope_enter", "mm", "relu", "scope_exit"]
    text = op_sdk.explain(backend).summary()
    assert ("streams (one Inductor partition per stream region, concurrently: CPU worker "
            "threads, or CUDA side streams):") in text
    assert "s1: scope_enter, mm, relu, scope_exit" in text


def test_max_autotune_lowers_scopes_that_name_no_second_stream():
    # a scope without the stream label keeps the enclosing stream: one stream, one graph
    def fn(x):
        torch.ops.air.scope_enter(["_some_other_key"], ["v"])
        y = x.cos()
        torch.ops.air.scope_exit()
        return y + 1

    opt, backend = _compile(fn, "max-autotune")
    x = torch.randn(8)
    torch.testing.assert_close(opt(x), x.cos() + 1)
    graph = op_sdk.explain(backend).reports[-1].graphs[0]
    assert graph.executor in ("inductor", "inductor-cpp")
    assert set(graph.nodes_by_stream()) == {"main"}


def test_report_shows_each_nodes_stream():
    opt, backend = _compile(_SeedModel(), post_grad_custom_pre_pass=_seed_pass)
    opt(torch.randn(3, 3))
    explanation = op_sdk.explain(backend)
    text = explanation.summary()
    assert "streams (concurrently: CPU worker threads, or CUDA side streams):" in text
    assert "stream_1: scope_enter_default, mm, abs_1, record_default, scope_exit_default" in text
    graph = explanation.to_dict()["compiles"][-1]["graphs"][0]
    assert graph["streams"]["mm"] == "stream_1" and graph["streams"]["sub"] == "main"


def test_single_stream_graphs_have_no_stream_report():
    opt, backend = _compile(lambda x: x.sin() + 1)
    opt(torch.randn(4))
    assert op_sdk.explain(backend).reports[-1].graphs[0].streams == {}
    assert "streams" not in op_sdk.explain(backend).summary()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device: the side "
                    "streams, events and record_stream of CudaStreamProgram run on CUDA only")
@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_cuda_side_streams_give_the_single_stream_result(mode):
    opt, backend = _compile(_SeedModel(), mode, post_grad_custom_pre_pass=_seed_pass)
    model = _SeedModel()
    for _ in range(3):
        x = torch.randn(64, 64, device="cuda")
        for a, b in zip(opt(x), model(x)):
            torch.testing.assert_close(a, b)
    executor = op_sdk.explain(backend).reports[-1].graphs[0].executor
    if mode == "reduce-overhead":
        assert executor == "cudagraphs"
    else:  # one Inductor (Triton) partition per stream region, launched on its stream
        assert executor == "inductor+streams"
    assert ("stream_1", torch.cuda.current_device()) in streams._CUDA_STREAMS


def _scoped_graph_module() -> torch.fx.GraphModule:
    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.call_function(torch.ops.air.scope_enter.default, (["_user_stream_label"], ["side"]))
    y = g.call_function(torch.ops.aten.cos.default, (x,))
    g.call_function(torch.ops.air.scope_exit.default, ())
    z = g.call_function(torch.ops.aten.sin.default, (x,))
    g.output((g.call_function(torch.ops.aten.add.Tensor, (y, z)),))
    return torch.fx.GraphModule(torch.nn.Module(), g)


def test_cpu_program_on_a_hand_made_graph():
    gm = _scoped_graph_module()
    x = torch.randn(256)
    program = streams.executor_for(gm, [x])
    assert isinstance(program, streams.CpuStreamProgram)
    assert program.plan.streams == ["main", "side"]
    (out,) = program([x])
    assert torch.equal(out, x.cos() + x.sin())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_program_runs_nodes_on_their_side_stream():
    gm = _scoped_graph_module()
    x = torch.randn(1 << 20, device="cuda")
    program = streams.executor_for(gm, [x])
    assert isinstance(program, streams.CudaStreamProgram)
    (out,) = program([x])
    torch.cuda.synchronize()
    assert torch.equal(out, x.cos() + x.sin())
    assert ("side", x.device.index) in streams._CUDA_STREAMS


# -- visibility: the HTML / Markdown report and the Chrome trace ------------------------------

def test_report_pages_draw_a_lane_per_stream_and_the_trace(tmp_path):
    from op_sdk.app.report import stream_data, trace_data
    from op_sdk.app.report_page import render_html, render_markdown

    def fn(x, w):
        with npu_stream_switch("lane_b"):
            y = torch.relu(x @ w)
        z = (x @ w.t()).sin()
        return y + z

    opt, backend = _compile(fn)
    x, w = torch.randn(256, 256), torch.randn(256, 256)
    opt(x, w)
    traced = trace_data(lambda: opt(x, w), str(tmp_path))
    data = {"title": "t", "streams": stream_data(op_sdk.explain(backend)), "trace": traced}
    html, md = render_html(data), render_markdown(data)
    assert html.count('class="lane"') == 2 and ">lane_b</text>" in html and ">main</text>" in html
    assert "| lane_b | scope_enter, mm, relu, scope_exit |" in md
    # the worker's operators are in the trace, on a thread of their own
    threads = traced["threads"]
    by_stream = {s: tid for tid, t in threads.items() for s in t["streams"]}
    assert set(by_stream) == {"main", "lane_b"} and by_stream["main"] != by_stream["lane_b"]
    assert threads[by_stream["lane_b"]]["ops"] >= 2  # mm and relu at least
    assert os.path.getsize(traced["path"]) > 0


def test_moe_example_puts_the_shared_expert_on_its_own_stream():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples"))
    try:
        import moe_multistream as moe
    finally:
        sys.path.pop(0)
    block = moe.MoEBlock(hidden=64, inter=32, experts=4, shared_inter=64).eval()
    x = torch.randn(1, 16, 64)
    with torch.no_grad():
        ref = block(x)
        compiled, backend = moe.compile_block(block, multi_stream=True)
        _LOG.clear()
        for _ in range(10):
            torch.testing.assert_close(compiled(x), ref, rtol=1e-5, atol=1e-5)
    lanes = op_sdk.explain(backend).reports[-1].graphs[0].nodes_by_stream()
    shared = lanes[moe.SHARED_STREAM]
    assert shared[0].startswith("scope_enter") and shared[-1].startswith("scope_exit")
    assert sum(n.startswith("mm") for n in shared) == 2           # gate_up and down
    assert sum(n.startswith("mm") for n in lanes["main"]) == 1 + 2 * 4  # router + experts
    assert any(n.startswith("wait") for n in lanes["main"])


def test_callers_on_several_threads_share_the_workers():
    # two side streams that wait for each other, run from three caller threads at once:
    # every run completes with its own result
    # (stream a waits for b and b for a: queued crosswise on the two workers, two runs would
    # each wait for the other's job)
    def fn(x):
        with npu_stream_switch("cross_a"):
            a = T.tid(x.cos(), "a")
            ta = torch.ops.air.record()
        with npu_stream_switch("cross_b"):
            torch.ops.air.wait([ta])
            b = T.tid(a.sin(), "b")
            tb = torch.ops.air.record()
        with npu_stream_switch("cross_a"):
            torch.ops.air.wait([tb])
            a2 = T.tid(b.exp(), "a2")
        c = x * 2
        return a + b + c + a2

    opt, _ = _compile(fn)
    x = torch.randn(64)
    ref = x.cos() + x.cos().sin() + x * 2 + x.cos().sin().exp()
    opt(x)
    errors = []

    def caller():
        try:
            for _ in range(200):
                assert torch.equal(opt(x), ref)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=caller) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "the callers deadlocked"
    assert not errors, errors


def test_debug_log_shows_the_graph_a_user_pass_left(caplog):
    import logging

    opt, _ = _compile(_SeedModel(), post_grad_custom_pre_pass=_seed_pass)
    with caplog.at_level(logging.DEBUG, logger="op_sdk"):
        opt(torch.randn(3, 3))
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "graph after the user pass config.post_grad_custom_pre_pass (_seed_pass)" in text
    assert "torch.ops.air.scope_enter.default" in text and "air.wait.default" in text
    assert op_sdk.logger is logging.getLogger("op_sdk")


def test_a_write_in_the_middle_of_the_graph_is_a_barrier_for_every_stream():
    # main: a long matmul, then buf.add_(1); side stream, after the write in graph order:
    # reads buf. Without the barrier the worker would read buf while the matmul runs.
    g = torch.fx.Graph()
    x, buf = g.placeholder("x"), g.placeholder("buf")
    slow = g.call_function(torch.ops.aten.mm.default, (x, x))
    slow = g.call_function(torch.ops.aten.mm.default, (slow, x))
    g.call_function(torch.ops.aten.add_.Tensor, (buf, 1))
    g.call_function(torch.ops.air.scope_enter.default, (["_user_stream_label"], ["after_write"]))
    seen = g.call_function(torch.ops.aten.clone.default, (buf,))
    g.call_function(torch.ops.air.scope_exit.default, ())
    g.output((seen, slow))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    program = streams.executor_for(gm, [])
    write = next(n for n in gm.graph.nodes if n.target == torch.ops.aten.add_.Tensor)
    first_on_side = program.side["after_write"][0]
    assert write in program.plan.deps[first_on_side]
    for _ in range(20):
        x, buf = torch.randn(384, 384), torch.zeros(1024)
        out, _ = program([x, buf])
        assert torch.equal(out, torch.ones(1024))


def test_the_cpu_executor_frees_an_intermediate_once_its_users_ran():
    import weakref

    refs = []

    def keep(x):
        refs.append(weakref.ref(x))
        return x.clone()

    g = torch.fx.Graph()
    x = g.placeholder("x")
    g.call_function(torch.ops.air.scope_enter.default, (["_user_stream_label"], ["frees"]))
    big = g.call_function(torch.ops.aten.cos.default, (x,))      # read by keep only
    kept = g.call_function(keep, (big,))
    small = g.call_function(torch.ops.aten.sum.default, (kept,))
    token = g.call_function(torch.ops.air.record.default, ())
    g.call_function(torch.ops.air.scope_exit.default, ())
    g.call_function(torch.ops.air.wait.default, ([token],))
    # on the main stream, after the wait: is `big` still held?
    alive = g.call_function(lambda x: torch.tensor(refs[-1]() is not None), (x,))
    g.output((small, alive))
    program = streams.executor_for(torch.fx.GraphModule(torch.nn.Module(), g), [])
    for _ in range(5):
        x = torch.randn(4096)
        small_v, alive_v = program([x])
        assert torch.equal(small_v, x.cos().sum()) and not bool(alive_v)


# -- graph dumps ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_dumps_show_the_streams(tmp_path, mode):
    """The manual's example with its graph dumps: "pbtxt" writes the converted graph with
    TorchAir's stream attribute on the scope's operators and the wait as a control edge;
    "txt" marks each node of the scope with its stream."""
    from tests.test_converters import parse_graphdef

    for kind in ("pbtxt", "txt"):
        cfg = op_sdk.CompilerConfig()
        if mode != "max-autotune":
            cfg.mode = mode
        cfg.post_grad_custom_post_pass = _seed_pass
        cfg.debug.graph_dump.type = kind
        cfg.debug.graph_dump.path = str(tmp_path / kind)
        torch._dynamo.reset()
        model = _SeedModel()
        opt = torch.compile(model, backend=op_sdk.get_npu_backend(compiler_config=cfg))
        x = torch.randn(3, 3)
        for a, b in zip(opt(x), model(x)):
            torch.testing.assert_close(a, b)
    (pb,) = (tmp_path / "pbtxt").iterdir()
    nodes = parse_graphdef(pb.read_text())      # TorchAir's form (its convert_to_pbtxt)
    by_type = {node["op"]: node for node in nodes.values()}
    label = {node["op"]: node["attr"].get("_user_stream_label") for node in nodes.values()}
    assert label["MatMulV2"] == {"s": ['"stream_1"']}
    assert label["Sub"] is None and label["Add"] is None
    abs_op = [name for name, node in nodes.items() if node["op"] == "OpSdkUnconverted"
              and '"aten.abs.default"' in str(node["attr"])]
    assert len(abs_op) == 1
    assert f"^{abs_op[0]}" in by_type["Sub"]["input"]  # wait: after the recorded abs
    txt = [f for f in (tmp_path / "txt").iterdir() if "post_grad_custom_post_pass_after" in f.name]
    assert txt, sorted(p.name for p in (tmp_path / "txt").iterdir())
    listing = txt[0].read_text()
    mm_line = [line for line in listing.splitlines() if "aten.mm.default" in line]
    sub_line = [line for line in listing.splitlines() if "aten.sub.Tensor" in line]
    assert mm_line and "# stream: stream_1" in mm_line[0]
    assert sub_line and "# stream:" not in sub_line[0]
    torch._dynamo.reset()


def test_no_fusion_or_merge_spans_streams():
    """A norm on the main stream and its quantisation inside a scope do not fuse (a near
    miss of kind "stream"), identical quantisations on two streams stay two, and the same
    code without the scope fuses."""
    from tests.fusion_harness import compile_and_run

    npu = torch.ops.npu

    def split(x1, x2, g):
        y, _, xo = npu.npu_add_rms_norm(x1, x2, g)
        with npu_stream_switch("side"):
            q, s = npu.npu_dynamic_quant(y)
        return q, s, xo

    def twice(x):
        q, s = npu.npu_dynamic_quant(x)
        with npu_stream_switch("side"):
            q2, s2 = npu.npu_dynamic_quant(x)
        return q, s, q2, s2

    def together(x1, x2, g):
        y, _, xo = npu.npu_add_rms_norm(x1, x2, g)
        q, s = npu.npu_dynamic_quant(y)
        return q, s, xo

    args = (torch.randn(4, 64, dtype=torch.bfloat16), torch.randn(4, 64, dtype=torch.bfloat16),
            torch.rand(64, dtype=torch.bfloat16))
    res = compile_and_run(split, args)
    assert res.report.match_count("add_rms_norm_dynamic_quant") == 0
    assert res.report.misses("add_rms_norm_dynamic_quant", "stream"), res.report.summary()
    for got, exp in zip(res.outputs, split(*args)):
        assert torch.equal(got, exp)
    res = compile_and_run(twice, args[:1])
    assert res.report.match_count("common_calls") == 0
    assert sum(t == npu.npu_dynamic_quant.default for t in res.targets) == 2
    assert compile_and_run(together, args).report.match_count("add_rms_norm_dynamic_quant") == 1


# -- max-autotune partitions -------------------------------------------------------------------

def test_split_cuts_at_scope_operators_and_keeps_getitems_with_their_source():
    from op_sdk.compiler import partitions

    g = torch.fx.Graph()
    x = g.placeholder("x")
    pair = g.call_function(torch.ops.aten.var_mean.correction, (x,), {"dim": [0]})
    a = g.call_function(torch.ops.aten.cos.default, (x,))
    g.call_function(torch.ops.air.scope_enter.default, (["_user_stream_label"], ["side"]))
    b = g.call_function(torch.ops.aten.sin.default, (a,))
    rec = g.call_function(torch.ops.air.record.default, ())
    c = g.call_function(torch.ops.aten.neg.default, (b,))
    g.call_function(torch.ops.air.scope_exit.default, ())
    var = g.call_function(operator.getitem, (pair, 0))    # far from its source
    g.call_function(torch.ops.air.wait.default, ([rec],))
    d = g.call_function(torch.ops.aten.add.Tensor, (c, var))
    g.output((d, b))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    x_val = torch.randn(4, 4)
    for node, val in ((x, x_val), (pair, torch.var_mean(x_val, dim=[0]))):
        node.meta["val"] = val
    outer, segments = partitions.split(gm)
    assert [(s.stream, [n.name for n in s.nodes]) for s in segments] == [
        ("main", ["var_mean_correction", "getitem", "cos_default"]),
        ("side", ["sin_default"]), ("side", ["neg_default"]), ("main", ["add_tensor"])]
    assert [n.name for n in segments[0].outputs] == ["getitem", "cos_default"]
    assert [n.name for n in segments[1].inputs] == ["cos_default"]
    assert [n.name for n in segments[1].outputs] == ["sin_default"]  # read by neg and output
    assert not any(s.writes for s in segments)
    # the outer graph: the scope operators in place around one call per segment
    kinds = [str(n.target) if n.op == "call_function" and not isinstance(
        n.target, partitions._Launch) else n.op for n in outer.nodes]
    assert kinds.count("air.scope_enter.default") == 1 and "air.wait.default" in kinds
    launches = [n for n in outer.nodes if isinstance(n.target, partitions._Launch)]
    assert [n.target.stream for n in launches] == ["main", "side", "side", "main"]
    plan = streams.plan(outer)
    assert [plan.stream[n] for n in launches] == ["main", "side", "side", "main"]


def test_max_autotune_partitions_run_frozen_prepacked_weights():
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples"))
    try:
        from moe_multistream import MoEBlock, compile_block
    finally:
        sys.path.pop(0)
    block = MoEBlock(hidden=64, inter=32, experts=4, shared_inter=64).eval()
    x = torch.randn(1, 8, 64)
    with torch.no_grad():
        opt, backend = compile_block(block, True, "max-autotune")
        backend.config.experimental_config.frozen_parameter = True
        ref = block(x)
        for _ in range(3):
            torch.testing.assert_close(opt(x), ref, rtol=1e-5, atol=1e-5)
    graph = op_sdk.explain(backend).reports[-1].graphs[0]
    assert graph.executor.endswith("+streams")
    assert len(graph.nodes_by_stream()["shared_expert"]) >= 5
    assert any(s.name == "weight_prepack" and not s.skipped for s in graph.stages)


def test_max_autotune_partitions_with_dynamic_shapes():
    def fn(x, w):
        with npu_stream_switch("dyn"):
            y = torch.tanh(x @ w)
        z = (x * 2).sum(-1, keepdim=True)
        return y + z

    cfg = op_sdk.CompilerConfig()
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    torch._dynamo.reset()
    opt = torch.compile(fn, backend=backend, dynamic=True)
    w = torch.randn(16, 16)
    for rows in (5, 9, 33):
        x = torch.randn(rows, 16)
        torch.testing.assert_close(opt(x, w), fn(x, w))
    assert op_sdk.explain(backend).reports[-1].graphs[0].executor.endswith("+streams")


def test_max_autotune_partitions_with_the_compile_caches_on():
    # the whole graph is never stored (no FX graph cache key), each segment is: a second
    # compile of the same function in a fresh Dynamo gives the same results
    from torch._functorch import config as fconfig
    from torch._inductor import config as iconfig

    def fn(x):
        with npu_stream_switch("cached"):
            y = x.cos() * 3
        return y + x.sin()

    x = torch.randn(64)
    with iconfig.patch(fx_graph_cache=True), fconfig.patch(enable_autograd_cache=True):
        for _ in range(2):
            opt, backend = _compile(fn, "max-autotune")
            torch.testing.assert_close(opt(x), fn(x))
            graph = op_sdk.explain(backend).reports[-1].graphs[0]
            assert graph.executor.endswith("+streams")
    torch._dynamo.reset()


def test_max_autotune_fusions_apply_inside_a_stream_partition():
    npu = torch.ops.npu

    def fn(x1, x2, g):
        h = x1 * 2
        with npu_stream_switch("side"):
            y, _, xo = npu.npu_add_rms_norm(x1, x2, g)
            q, s = npu.npu_dynamic_quant(y)
        return q, s, xo, h

    args = (torch.randn(4, 64, dtype=torch.bfloat16), torch.randn(4, 64, dtype=torch.bfloat16),
            torch.rand(64, dtype=torch.bfloat16))
    opt, backend = _compile(fn, "max-autotune")
    # the fused operator's results (it quantises the norm's fp32 result, not its bf16 one)
    y, _, xo, s, _ = npu.npu_add_rms_norm_dynamic_quant(*args)
    for got, exp in zip(opt(*args), (y, s, xo, args[0] * 2)):
        assert torch.equal(got, exp)
    graph = op_sdk.explain(backend).reports[-1].graphs[0]
    assert graph.executor.endswith("+streams")
    assert graph.match_count("add_rms_norm_dynamic_quant") == 1
    assert any(n.startswith("npu_add_rms_norm_dynamic_quant")
               for n in graph.nodes_by_stream()["side"])


def test_max_autotune_trace_shows_each_partition_on_its_streams_thread(tmp_path):
    from op_sdk.app.report import trace_data

    def fn(x):
        with npu_stream_switch("traced"):
            a = T.started_then_wait(x.cos())   # blocks until the main stream's op ran
        b = T.open_once_started(x * 2)         # blocks until the side stream's op started
        return a, b

    opt, _ = _compile(fn, "max-autotune")
    x = torch.randn(8)
    _GATE.clear(), _STARTED.clear()
    opt(x)
    _GATE.clear(), _STARTED.clear()
    traced = trace_data(lambda: opt(x), str(tmp_path))
    threads = traced["threads"]
    by_stream = {s: tid for tid, t in threads.items() for s in t["streams"]}
    assert set(by_stream) == {"main", "traced"} and by_stream["main"] != by_stream["traced"]
    assert threads[by_stream["traced"]]["ops"] >= 1     # the side partition's range
    assert traced["overlap_us"] > 0


# -- TorchAir's other scopes: recorded on the GE graph's operators ---------------------------

def _scoped(x, w):
    from op_sdk import scope

    with scope.super_kernel("sk1", "stream-fusion=1"):
        a = torch.mm(x, w)
        with scope.super_kernel(None):  # out of the super kernel
            b = a.neg()
    with scope.limit_core_num(4, 8), scope.op_never_timeout(True):
        c = b - 1.0
    with scope.data_dump():
        d = c * 2.0
    return d + x


def test_torchair_scopes_are_recorded_on_the_ge_operators():
    """super_kernel / limit_core_num / op_never_timeout / data_dump write TorchAir's
    attributes on the operators converted inside them (op_never_timeout's as a bool; an
    empty super_kernel takes its operators out of the enclosing one); the values are the
    plain code's, eager and compiled."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.converters import convert_fx

    x, w = torch.randn(3, 3), torch.randn(3, 3)
    gm = make_fx(_scoped)(x, w)
    ops = {o.type: o.attr_values() for o in convert_fx(gm, strict=False).ops}
    assert ops["MatMulV2"]["_super_kernel_scope"] == "sk1"
    assert ops["MatMulV2"]["_super_kernel_options"] == "stream-fusion=1"
    assert "_super_kernel_scope" not in ops["Neg"] and "_super_kernel_options" not in ops["Neg"]
    assert ops["Sub"]["_op_aicore_num"] == "4" and ops["Sub"]["_op_vectorcore_num"] == "8"
    assert ops["Sub"]["_op_exec_never_timeout"] is True
    assert ops["Mul"]["torchair_enable_data_dump"] == "True"
    assert not any(k.startswith(("_super", "_op_", "torchair_")) for k in ops["Add"])
    for mode in ("reduce-overhead", "max-autotune"):
        cfg = op_sdk.CompilerConfig()
        cfg.mode = mode
        torch._dynamo.reset()
        got = torch.compile(_scoped, backend=op_sdk.get_npu_backend(compiler_config=cfg))(x, w)
        torch.testing.assert_close(got, _scoped(x, w))
    torch._dynamo.reset()


@pytest.mark.parametrize("mode", MODES)
def test_the_report_shows_the_torchair_scope_regions(mode, tmp_path):
    """Each TorchAir scope is a region of the compile report (summary, JSON, HTML and
    Markdown pages): its operators, the same the GE graph marks."""
    from op_sdk.app.report_page import render_html, render_markdown
    from op_sdk.app.report import scope_data

    opt, backend = _compile(_scoped, mode)
    x, w = torch.randn(3, 3), torch.randn(3, 3)
    opt(x, w)
    explanation = op_sdk.explain(backend)
    graph = explanation.reports[-1].graphs[0]
    assert list(graph.scopes) == ["super_kernel 'sk1' options 'stream-fusion=1'",
                                  "limit_core_num(4, 8)", "op_never_timeout", "data_dump"]
    assert len(graph.scopes["super_kernel 'sk1' options 'stream-fusion=1'"]) == 1  # the mm
    assert graph.scopes["limit_core_num(4, 8)"] == graph.scopes["op_never_timeout"]
    assert len(graph.scopes["data_dump"]) == 1
    text = explanation.summary()
    assert "  scopes:\n    super_kernel 'sk1' options 'stream-fusion=1': " in text
    data = explanation.to_dict()["compiles"][-1]["graphs"][0]
    assert data["scopes"] == graph.scopes
    from op_sdk.compiler.report import GraphReport

    assert GraphReport.from_dict(graph.to_dict()).scopes == graph.scopes
    page = {"title": "t", "scopes": scope_data(explanation)}
    assert "<h2>Scopes</h2>" in render_html(page) and "limit_core_num(4, 8)" in render_html(page)
    assert "## Scopes" in render_markdown(page)


def test_torchair_scope_arguments_are_checked():
    from op_sdk import scope

    with pytest.raises(TypeError, match="op_never_timeout\\(\\) argument 'enable' must be bool"):
        scope.op_never_timeout(1)
    with pytest.raises(ValueError, match="op_aicore_num must be an int >= 1"):
        scope.limit_core_num(0, 0)
    with pytest.raises(ValueError, match="op_vectorcore_num must be an int >= 0"):
        scope.limit_core_num(2, -1)
    with pytest.raises(TypeError, match="super_kernel: scope must be a str"):
        scope.super_kernel(3)


# -- torchair.ops.npu_print -----------------------------------------------------------------

def test_npu_print_prints_as_torchair_does(capsys):
    from op_sdk.ops import npu_print

    npu_print("x:", torch.arange(10), "y", torch.tensor([[1.5, 2.0], [3.25, float("nan")]]).bfloat16())
    npu_print(torch.arange(24).reshape(4, 6), summarize_size=1, tensor_detail=True)
    npu_print(torch.arange(8), "{}", summarize_size=-1)  # a str holding the placeholder
    assert capsys.readouterr().out.splitlines() == [
        "x: [0 1 2 ... 7 8 9] y [[1.5 2]", " [3.25 nan]]",
        "tensor([[0 ... 5]", " ...", " [18 ... 23]], shape=[4, 6], dtype=torch.int64)",
        "[0 1 2 3 4 5 6 7] {}"]


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_npu_print_prints_inside_a_compiled_graph(capsys, mode):
    from op_sdk.ops import npu_print

    seen = []

    def f(x):
        y = x * 2
        npu_print("y:", y)
        return y + 1

    cfg = op_sdk.CompilerConfig()
    cfg.mode = mode
    cfg.post_grad_custom_post_pass = lambda gm, inputs, c: seen.extend(
        str(n.target) for n in gm.graph.nodes if n.op == "call_function")
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=op_sdk.get_npu_backend(compiler_config=cfg), fullgraph=True)
    capsys.readouterr()
    for _ in range(2):
        assert torch.equal(compiled(torch.arange(4.0)), torch.arange(4.0) * 2 + 1)
    assert capsys.readouterr().out == "y: [0 2 4 6]\ny: [0 2 4 6]\n"
    assert "air.print.default" in seen
    torch._dynamo.reset()


def test_npu_print_arguments_are_checked():
    from op_sdk.ops import npu_print

    with pytest.raises(ValueError, match="requires at least one tensor"):
        npu_print("no tensor")
    with pytest.raises(TypeError, match="but got 'list' at position 1"):
        npu_print(torch.ones(1), [1])
    with pytest.raises(ValueError, match="summarize_size must be positive or -1"):
        npu_print(torch.ones(1), summarize_size=0)
    with pytest.raises(TypeError, match="tensor_detail must be bool"):
        npu_print(torch.ones(1), tensor_detail=1)
