"""The backend's pipeline: user pre / post passes (order, arguments, errors), no-op
removal, graph dumps, reports, executors, custom decompositions, Inductor's cache."""

from __future__ import annotations

import logging
import os
import re

import pytest
import torch

import op_sdk
from op_sdk.compiler.pipeline import STAGES, UserPassError
from op_sdk.compiler.report import recent_reports
from tests.fusion_harness import compile_and_run, config, no_inductor_caches

npu, aten = torch.ops.npu, torch.ops.aten
MODES = ["reduce-overhead", "max-autotune"]


def layer(x1, x2, gamma, smooth):
    y, _, xo = npu.npu_add_rms_norm(x1, x2, gamma)
    q, s = npu.npu_dynamic_quant(y, smooth_scales=smooth)
    return q, s, xo * 2


def layer_inputs(dtype=torch.float16):
    return [torch.randn(2, 7, 32, dtype=dtype), torch.randn(2, 7, 32, dtype=dtype),
            torch.randn(32, dtype=dtype), torch.rand(32, dtype=dtype) + 0.5]


def _targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("mode", MODES)
def test_user_passes_run_in_order_with_the_right_arguments(mode):
    calls = []
    cfg = config(mode)

    def pre(gm, example_inputs, config):
        calls.append(("pre", type(gm), len(example_inputs), config,
                      npu.npu_add_rms_norm.default in _targets(gm)))
        return "ignored"  # the contract: the return value is ignored

    def post(gm, example_inputs, config):
        calls.append(("post", type(gm), len(example_inputs), config,
                      npu.npu_add_rms_norm_dynamic_quant.default in _targets(gm)))
        return object()

    cfg.post_grad_custom_pre_pass = pre
    cfg.post_grad_custom_post_pass = post
    inputs = layer_inputs()
    result = compile_and_run(layer, inputs, cfg)
    # the pre pass sees the unfused graph, the post pass the fused one, once each
    assert [c[0] for c in calls] == ["pre", "post"]
    for _, gm_type, n_inputs, conf, ok in calls:
        assert issubclass(gm_type, torch.fx.GraphModule)
        assert n_inputs == 4 and conf is cfg and ok
    stages = [s.name for s in result.report.graphs[0].stages]
    assert stages == list(STAGES)


@pytest.mark.parametrize("mode", MODES)
def test_example_inputs_are_the_graph_inputs(mode):
    seen = []

    def pre(gm, example_inputs, config):
        placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
        seen.append([(tuple(x.shape), x.dtype) for x in example_inputs])
        assert len(placeholders) == len(example_inputs)

    cfg = config(mode)
    cfg.post_grad_custom_pre_pass = pre
    compile_and_run(layer, layer_inputs(), cfg)
    assert seen == [[((2, 7, 32), torch.float16)] * 2 + [((32,), torch.float16)] * 2]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("slot", ["post_grad_custom_pre_pass", "post_grad_custom_post_pass"])
def test_user_pass_exception_names_the_pass(mode, slot):
    def broken_pass(gm, example_inputs, config):
        raise KeyError("cannot handle this graph")

    cfg = config(mode)
    setattr(cfg, slot, broken_pass)
    torch._dynamo.reset()
    with pytest.raises(Exception) as info, no_inductor_caches():
        torch.compile(layer, backend=op_sdk.get_npu_backend(compiler_config=cfg))(
            *layer_inputs())
    text = str(info.value)
    assert slot in text and "broken_pass" in text and "cannot handle this graph" in text
    chain = info.value
    while chain is not None and not isinstance(chain, UserPassError):
        chain = chain.__cause__ or chain.__context__
    assert isinstance(chain, UserPassError)


def test_user_pass_leaving_an_invalid_graph_names_the_pass():
    def dangling(gm, example_inputs, config):
        node = next(n for n in gm.graph.nodes if n.op == "call_function")
        other = torch.fx.Graph().placeholder("stranger")
        node.args = (other,) + tuple(node.args[1:])

    cfg = config()
    cfg.post_grad_custom_pre_pass = dangling
    with pytest.raises(Exception, match="graph left by the user pass .*dangling.* is invalid"):
        compile_and_run(layer, layer_inputs(), cfg)


@pytest.mark.parametrize("mode", MODES)
def test_user_pass_edits_take_effect(mode):
    def double_to_triple(gm, example_inputs, config):
        for node in gm.graph.nodes:
            if node.target == aten.mul.Tensor and node.args[1] == 2:
                node.args = (node.args[0], 3)

    cfg = config(mode)
    cfg.post_grad_custom_post_pass = double_to_triple
    inputs = layer_inputs()
    result = compile_and_run(layer, inputs, cfg)
    x_out = npu.npu_add_rms_norm(*inputs[:3])[2]
    torch.testing.assert_close(result.outputs[2], x_out * 3)


def test_remove_noop_ops_switch():
    def fn(x1, x2, gamma, smooth):
        y, _, xo = npu.npu_add_rms_norm(x1, x2, gamma)
        q, s = npu.npu_dynamic_quant(y.view(y.shape), smooth_scales=smooth)  # a no-op view
        return q, s, xo

    seen = {}

    def pre(name):
        def capture(gm, example_inputs, config):
            seen[name] = _targets(gm)
        return capture

    for on in (True, False):
        cfg = config(experimental_config__remove_noop_ops=on)
        cfg.post_grad_custom_post_pass = pre(on)
        result = compile_and_run(fn, layer_inputs(), cfg)
        # without the no-op removal the stray view blocks the fusion
        assert result.report.match_count("add_rms_norm_dynamic_quant") == (1 if on else 0)
    assert aten.reshape.default in seen[False] and aten.reshape.default not in seen[True]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dump_type", ["txt", "py"])
def test_graph_dumps(tmp_path, dump_type, mode):
    cfg = config(mode, debug__graph_dump__type=dump_type, debug__graph_dump__path=str(tmp_path))
    result = compile_and_run(layer, layer_inputs(), cfg)
    n = result.report.index
    tail = rf"_rank_0_pid_{os.getpid()}_ts_\d{{20}}\.{dump_type}$"
    # TorchAir's pair: Dynamo's graph before AOTAutograd / decompositions, the passes' result
    (original,) = [f for f in os.listdir(tmp_path) if re.match(rf"dynamo_original_graph_{n}{tail}", f)]
    (optimized,) = [f for f in os.listdir(tmp_path)
                    if re.match(rf"dynamo_optimized_graph_{n}_inference{tail}", f)]
    original, optimized = (tmp_path / original).read_text(), (tmp_path / optimized).read_text()
    assert "npu_add_rms_norm" in original and "aten" not in original  # not decomposed yet
    assert "npu_add_rms_norm_dynamic_quant" not in original
    assert "npu_add_rms_norm_dynamic_quant" in optimized and "aten" in optimized
    files = sorted(f for f in os.listdir(tmp_path) if not f.startswith("dynamo_"))
    pattern = re.compile(rf"graph_{result.report.index}_inference_(\d)_(\w+?)_(before|after)"
                         rf"_rank_0_pid_{os.getpid()}_ts_\d{{20}}\.{dump_type}$")
    parsed = [pattern.match(f) for f in files]
    assert all(parsed), files
    ran = [(int(m.group(1)), m.group(2), m.group(3)) for m in parsed]
    # every stage that ran, before and after (the capture post pass runs too; not set:
    # the user pre pass; off by default: weight_prepack; where Inductor compiles only:
    # inline_kernels)
    skipped = {STAGES[0], "weight_prepack"} | ({"inline_kernels"} if mode != "max-autotune"
                                               else set())
    assert sorted(ran) == sorted((i, s, w) for i, s in enumerate(STAGES) if s not in skipped
                                 for w in ("before", "after"))
    text = {(s, w): (tmp_path / f).read_text() for (i, s, w), f in zip(ran, files)}
    assert "npu_add_rms_norm_dynamic_quant" not in text[("pattern_fusion", "before")]
    assert "npu_add_rms_norm_dynamic_quant" in text[("pattern_fusion", "after")]
    if dump_type == "py":
        assert "def forward" in text[("pattern_fusion", "after")]
    stage = result.report.graphs[0].stage("pattern_fusion")
    assert len(stage.dumps) == 2 and all(os.path.exists(f) for f in stage.dumps)


def test_a_failing_dump_warns_and_the_compile_goes_on(tmp_path, monkeypatch):
    from op_sdk.compiler.dump import GraphDumper

    def broken(self, gm, name):
        raise OSError("disk full")

    monkeypatch.setattr(GraphDumper, "dump", broken)
    cfg = config("reduce-overhead", debug__graph_dump__type="py",
                 debug__graph_dump__path=str(tmp_path))
    with pytest.warns(UserWarning, match=r"graph dump \S+ failed \(OSError: disk full\); the "
                                         r"compile goes on"):
        result = compile_and_run(layer, layer_inputs(), cfg)
    assert result.report.graphs[0].match_count() >= 1 and os.listdir(tmp_path) == []


def test_report_structure():
    result = compile_and_run(layer, layer_inputs())
    report = result.report
    assert report is recent_reports()[-1] and report in result.backend.reports
    graph = report.graphs[0]
    assert graph.graph == "inference" and graph.executor == "eager"
    assert [s.name for s in graph.stages] == list(STAGES)
    fusion = graph.stage("pattern_fusion")
    assert fusion.nodes_after < fusion.nodes_before and fusion.seconds > 0
    assert report.seconds >= report.pass_seconds > 0
    d = report.to_dict()
    assert d["graphs"][0]["matches"] == [{"fusion": "add_rms_norm_dynamic_quant",
                                          "variant": "x_out", "count": 1}]
    assert "fused add_rms_norm_dynamic_quant[x_out] x1" in report.summary()


def test_each_stage_is_logged_at_debug_in_torchairs_words(caplog):
    """TorchAir logs each pass around its execution ("[forward] before
    [post_grad_custom_pre_pass] execution"); op_sdk logs each stage of each graph the same
    way (logger op_sdk.compiler), and why a stage did not run."""
    with caplog.at_level(logging.DEBUG, logger="op_sdk.compiler"):
        compile_and_run(layer, layer_inputs(), config("reduce-overhead"))
    lines = [r.getMessage() for r in caplog.records if r.name == "op_sdk.compiler"]
    assert "[inference] before [pattern_fusion] execution" in lines
    assert "[inference] after [pattern_fusion] execution" in lines
    assert lines.index("[inference] before [remove_noop_ops] execution") < \
        lines.index("[inference] before [pattern_fusion] execution")
    assert "[inference] skip [post_grad_custom_pre_pass]: not set" in lines
    assert "[inference] skip [inline_kernels]: no Inductor compiles the graph" in lines


def test_run_eagerly_skips_inductor():
    result = compile_and_run(layer, layer_inputs(), config("max-autotune",
                                                           debug__run_eagerly=True))
    assert result.report.graphs[0].executor == "eager"
    assert result.report.match_count() == 1


@pytest.mark.parametrize("choice,expected", [("auto", True), (True, True), (False, False)])
def test_max_autotune_cpp_wrapper(choice, expected):
    """inductor_cpp_wrapper: Inductor's C++ wrapper is on while the graph compiles (the user
    post pass runs inside that compile and sees Inductor's config), the report says so, and
    the C++-wrapped graph computes what eager does."""
    import torch._inductor.config as inductor_config

    seen = []
    cfg = config("max-autotune", experimental_config__inductor_cpp_wrapper=choice,
                 post_grad_custom_post_pass=lambda gm, ex, c: seen.append(
                     inductor_config.cpp_wrapper and inductor_config.cpp_wrapper_build_separate))
    inputs = layer_inputs()
    result = compile_and_run(layer, inputs, cfg)
    assert seen == [expected]
    assert result.report.graphs[0].executor == ("inductor-cpp" if expected else "inductor")
    assert result.report.match_count("add_rms_norm_dynamic_quant") == 1
    q, s, xo = result.outputs
    q_ref, s_ref, xo_ref = layer(*inputs)
    assert (q.int() - q_ref.int()).abs().max() <= 1
    torch.testing.assert_close(s, s_ref, rtol=1e-3, atol=1e-6)
    torch.testing.assert_close(xo, xo_ref)


def test_cpp_wrapper_auto_is_cpu_only():
    cfg = op_sdk.CompilerConfig()
    assert cfg.cpp_wrapper_for([torch.ones(2), 3])
    assert not cfg.cpp_wrapper_for([torch.ones(2), torch.ones(2, device="meta")])
    assert not cfg.cpp_wrapper_for([4])
    cfg.experimental_config.inductor_cpp_wrapper = False
    assert not cfg.cpp_wrapper_for([torch.ones(2)])


def test_custom_decompositions():
    def fn(x):
        return torch.nn.functional.silu(x) + 1

    def silu_decomp(x):
        return x * torch.sigmoid(x)

    seen = []
    for mode in MODES:
        cfg = config(mode)
        cfg.post_grad_custom_pre_pass = lambda gm, ex, c: seen.append(_targets(gm))
        backend = op_sdk.get_npu_backend(compiler_config=cfg,
                                         custom_decompositions={aten.silu.default: silu_decomp})
        x = torch.randn(8)
        result = compile_and_run(fn, [x], cfg, backend=backend)
        torch.testing.assert_close(result.outputs, fn(x))
    for targets in seen:
        assert aten.silu.default not in targets and aten.sigmoid.default in targets


def test_training_forward_graph_gets_the_passes():
    seen = []

    def fn(x, w):
        return torch.bmm(x, w).transpose(0, 1).sum()

    cfg = config()
    cfg.post_grad_custom_pre_pass = lambda gm, ex, c: seen.append(len(ex))
    x = torch.randn(3, 5, 128, requires_grad=True)
    w = torch.randn(3, 128, 128, requires_grad=True)
    torch._dynamo.reset()
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    out = torch.compile(fn, backend=backend)(x, w)
    out.backward()
    graph = backend.last_report.graphs[0]
    assert [g.graph for g in backend.last_report.graphs] == ["forward"]
    assert seen == [2]  # once, on the forward graph; not on the backward graph
    # the forward graph is already partitioned from its backward: fusing it is safe (an
    # intermediate saved for the backward is a graph output and so blocks a fusion)
    assert graph.match_count("transpose_batchmatmul") == 1
    torch.testing.assert_close(x.grad, w.detach().sum(-1).unsqueeze(1).expand(3, 5, 128),
                               rtol=1e-4, atol=1e-4)


def test_inductor_cache_stays_on(tmp_path, monkeypatch):
    """The passes carry a content uuid, so Inductor's FX graph cache keeps working: the
    second identical compile is a hit (and the passes do not run again); a config that
    changes what the passes do is a miss; with a user pass set, every compile runs it
    (TorchAir calls the user's passes on every compile), so such compiles are not cached."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    calls = _POST_CALLS
    calls.clear()

    def compile_once(user_pass=None, **options):
        torch._dynamo.reset()
        cfg = config("max-autotune", **options)
        if user_pass is not None:
            cfg.post_grad_custom_post_pass = user_pass
        backend = op_sdk.get_npu_backend(compiler_config=cfg)
        with torch._inductor.config.patch(fx_graph_cache=True):
            torch.compile(layer, backend=backend)(*layer_inputs())
        return backend.last_report

    counters.clear()
    first = compile_once()
    second = compile_once()
    assert (first.cache, second.cache) == ("", "hit")
    assert counters["inductor"]["fxgraph_cache_hit"] + counters["aot_autograd"][
        "autograd_cache_hit"] >= 1
    third = compile_once(experimental_config__remove_noop_ops=False)
    assert third.cache == ""
    reports = [compile_once(_counting_post_pass) for _ in range(2)]
    assert [r.cache for r in reports] == ["", ""] and len(calls) == 2


def test_a_cache_hit_reports_what_the_passes_did(tmp_path, monkeypatch):
    """On an Inductor cache hit the passes do not run; the report (and explain) show the
    record the compile that filled the cache stored, marked as a hit; with no stored
    record the report says so and how to compile with the passes again."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))

    def compile_once():
        torch._dynamo.reset()
        backend = op_sdk.get_npu_backend(compiler_config=config("max-autotune"))
        with torch._inductor.config.patch(fx_graph_cache=True):
            torch.compile(layer, backend=backend)(*layer_inputs())
        return backend

    first = compile_once().last_report
    assert first.cache == "" and first.match_count("add_rms_norm_dynamic_quant") == 1
    stored = list((tmp_path / "op_sdk_reports").glob("*.json"))
    assert len(stored) == 1
    backend = compile_once()
    second = backend.last_report
    assert second.cache == "hit"
    assert second.to_dict()["graphs"] == first.to_dict()["graphs"]
    assert op_sdk.explain(backend).patterns == {"add_rms_norm_dynamic_quant": 1}
    assert "Inductor cache hit: the passes did not run; what they did in the compile that " \
           "filled the cache" in second.summary()
    assert "fused add_rms_norm_dynamic_quant" in second.summary()
    stored[0].unlink()
    third = compile_once().last_report
    assert third.cache == "hit" and third.graphs == []
    assert "no record of them is stored" in third.summary() and "fx_graph_cache" in third.summary()


def test_graph_report_round_trips_through_its_dict():
    from op_sdk.compiler.report import GraphReport

    torch._dynamo.reset()
    backend = op_sdk.get_npu_backend(compiler_config=config("max-autotune"))
    with torch._inductor.config.patch(fx_graph_cache=False):
        torch.compile(layer, backend=backend)(*layer_inputs())
    g = backend.last_report.graphs[0]
    assert g.matches and g.effects and g.stages
    back = GraphReport.from_dict(g.to_dict())
    assert back == g and back.summary() == g.summary()


_POST_CALLS: list = []


def _counting_post_pass(gm, example_inputs, config):
    _POST_CALLS.append(1)


def test_uuid_is_content_based():
    from op_sdk.compiler.dump import GraphDumper
    from op_sdk.compiler.pipeline import PassPipeline
    from op_sdk.compiler.report import CompileReport
    from op_sdk.patterns import PatternRegistry

    def uuid(cfg):
        pipe = PassPipeline(cfg, PatternRegistry("t"), GraphDumper(None, None))
        patches = pipe.inductor_config_patches(CompileReport(0, "max-autotune"))
        return patches["post_grad_custom_pre_pass"].uuid()

    a, b = config("max-autotune"), config("max-autotune")
    assert uuid(a) == uuid(b) is not None
    b.experimental_config.pattern_fusion_pass = False
    assert uuid(a) != uuid(b)
    # a user pass runs on every compile, as TorchAir calls it: never cached
    for slot in ("post_grad_custom_pre_pass", "post_grad_custom_post_pass"):
        c = config("max-autotune")
        setattr(c, slot, _pass_one)
        assert uuid(c) is None
    # weight_prepack bakes the weights' values into the compiled graph: never cached
    d = config("max-autotune")
    d.experimental_config.frozen_parameter = True
    assert uuid(d) is None


def _pass_one(gm, example_inputs, config):
    pass


def test_cudagraphs_executor_falls_back_to_eager_off_cuda():
    """The CUDA-graph executor refuses graphs with CPU tensors (PyTorch's own rule) and
    runs them eagerly instead; this keeps the path importable and honest on CPU."""
    from op_sdk.compiler import executors

    inputs = layer_inputs()
    gm = torch.fx.experimental.proxy_tensor.make_fx(layer)(*inputs)  # values in node.meta
    run = executors.cudagraphs(gm, inputs, num_fixed=0, is_inference=True)
    out = run(list(inputs))
    torch.testing.assert_close(out[2], layer(*inputs)[2])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_reduce_overhead_uses_cuda_graphs_on_cuda():
    inputs = [x.cuda() for x in layer_inputs()]
    result = compile_and_run(layer, inputs, config("reduce-overhead"))
    assert result.report.graphs[0].executor == "cudagraphs"
    # a replay writes its outputs into the graph's buffers: the first call's outputs are
    # read (cloned) before the replays overwrite them, as PyTorch's CUDA-graph rule asks
    first = [t.clone() for t in result.outputs]
    for _ in range(3):  # replays
        out = torch.compile(layer, backend=result.backend)(*inputs)
    assert torch.equal(out[0], first[0])


def test_backend_by_name_with_torchair_options():
    """``torch.compile(m, backend="op_sdk", options={...})``: the torch_dynamo_backends
    entry point (no get_npu_backend call), options by their CompilerConfig paths."""
    from op_sdk.compiler import named

    assert "op_sdk" in torch._dynamo.list_backends()
    torch._dynamo.reset()
    options = {"mode": "reduce-overhead", "experimental_config.remove_noop_ops": False}
    args = layer_inputs()
    got = torch.compile(layer, backend="op_sdk", options=options)(*args)
    backend = named.backend_for(options)
    assert backend.config.mode.value == "reduce-overhead"
    assert backend.config.experimental_config.remove_noop_ops.value is False
    assert backend.last_report.graphs[0].match_count("add_rms_norm_dynamic_quant") == 1
    want = layer(*args)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=1)


def test_backend_by_torch_npus_name_npu():
    """``torch.compile(m, backend="npu")`` as a TorchAir script writes it (torch_npu's entry
    point of that name compiles with torchair.get_npu_backend()): op_sdk's backend with
    TorchAir's default CompilerConfig; options and mode as backend="op_sdk" takes them."""
    import importlib.metadata

    from op_sdk.compiler import named

    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    assert any(ep.name == "npu" and ep.value == "op_sdk.compiler.named:npu_backend" for ep in eps)
    assert "npu" in torch._dynamo.list_backends()
    torch._dynamo.reset()
    args = layer_inputs()
    got = torch.compile(layer, backend="npu")(*args)
    backend = named.backend_for(None)
    assert backend.config.mode.value == op_sdk.CompilerConfig().mode.value == "max-autotune"
    assert backend.last_report.graphs[0].match_count("add_rms_norm_dynamic_quant") == 1
    for g, w in zip(got, layer(*args)):
        torch.testing.assert_close(g, w, rtol=0, atol=1)
    torch._dynamo.reset()
    options = {"mode": "reduce-overhead", "experimental_config.remove_noop_ops": False}
    torch.compile(layer, backend="npu", options=options)(*args)
    backend = named.backend_for(options)
    assert backend.config.mode.value == "reduce-overhead"
    assert backend.config.experimental_config.remove_noop_ops.value is False
    with pytest.raises(Exception, match="no option 'no_such'"):
        torch._dynamo.reset()
        torch.compile(layer, backend="npu", options={"experimental_config.no_such": 1})(*args)


@pytest.mark.parametrize("options,message", [
    ({"experimental_config.no_such": 1}, "no option 'no_such'"),
    ({"no_such_group.x": 1}, "no group of options 'no_such_group'"),
    ({"mode": "fast"}, "mode"),
])
def test_backend_by_name_refuses_bad_options(options, message):
    torch._dynamo.reset()
    with pytest.raises(Exception, match=message):
        torch.compile(layer, backend="op_sdk", options=options)(*layer_inputs())
