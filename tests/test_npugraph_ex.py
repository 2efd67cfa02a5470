"""The npugraph_ex backend by name (op_sdk/compiler/npugraph_ex.py):
``torch.compile(m, backend="npugraph_ex", options={...})`` through the installed
torch_dynamo_backends entry point, npugraph_ex's option names, defaults and validation (its
error types and words), what each option does here, the user's passes called with
npugraph_ex's config, and the INFO line for options that do nothing off the NPU."""

from __future__ import annotations

import importlib.metadata
import logging

import pytest
import torch

from op_sdk.compiler import npugraph_ex as ex
from tests.test_compiler_pipeline import layer, layer_inputs

npu = torch.ops.npu


def _close(got, want):
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=1)


def test_entry_point_is_installed_and_listed():
    eps = importlib.metadata.entry_points(group="torch_dynamo_backends")
    assert any(ep.name == "npugraph_ex" and ep.value == "op_sdk.compiler.npugraph_ex:npugraph_ex_backend"
               for ep in eps)
    assert "npugraph_ex" in torch._dynamo.list_backends()


def test_backend_by_name_fuses_and_runs_as_captured():
    torch._dynamo.reset()
    args = layer_inputs()
    got = torch.compile(layer, backend="npugraph_ex")(*args)
    backend = ex.backend_for(None)
    assert backend.config.mode.value == "npugraph_ex"
    graph = backend.last_report.graphs[0]
    assert graph.match_count("add_rms_norm_dynamic_quant") == 1  # pattern_fusion_pass: True by default
    assert graph.executor == "eager"  # the graph runs as captured (CPU: no CUDA graph)
    _close(got, layer(*args))


def test_options_reach_op_sdks_config():
    torch._dynamo.reset()
    options = {"pattern_fusion_pass": False, "remove_noop_ops": False, "frozen_parameter": True,
               "capture_limit": 8, "clone_input": False}
    args = layer_inputs()
    got = torch.compile(layer, backend="npugraph_ex", options=options)(*args)
    cfg = ex.backend_for(options).config
    assert cfg.experimental_config.pattern_fusion_pass.value is False
    assert cfg.experimental_config.remove_noop_ops.value is False
    assert cfg.experimental_config.frozen_parameter.value is True
    assert ex.backend_for(options).last_report.graphs[0].match_count("add_rms_norm_dynamic_quant") == 0
    _close(got, layer(*args))
    torch._dynamo.reset()
    torch.compile(layer, backend="npugraph_ex", options={"force_eager": True})(*args)
    assert ex.backend_for({"force_eager": True}).config.debug.run_eagerly.value is True


def test_defaults_are_npugraph_exs():
    c = ex.CompilerConfig()
    assert c.options() == {
        "force_eager": False, "use_graph_pool": None, "reuse_graph_pool_in_same_fx": True,
        "capture_limit": "64", "clone_input": True, "clone_output": False,
        "disable_static_kernel_compile_cache": False, "static_kernel_compile": False,
        "frozen_parameter": False, "remove_noop_ops": True, "remove_cat_ops": True,
        "inplace_pass": True, "input_inplace_pass": True, "pattern_fusion_pass": True,
        "post_grad_custom_pre_pass": None, "post_grad_custom_post_pass": None,
        "dump_tensor_data": False, "data_dump_stage": "optimized", "data_dump_dir": "./",
        "super_kernel_optimize": False, "super_kernel_optimize_options": None,
        "super_kernel_debug_options": None, "deadlock_check": False,
        "capture_error_mode": "global", "mode": "npugraph_ex", "force_recapture": False,
        "unsafe_skip_npugraph_capture_validation": False, "record_statistics_debug_info": False,
        "_vllm_aclnn_static_kernel_sym_index": "0", "_vllm_aclnn_static_kernel_sym_range": None}


@pytest.mark.parametrize("options,exc,words", [
    ({"no_such": 1}, ValueError, "Invalid option 'no_such'. The 'CompilerConfig' object does not have"),
    ({"experimental_config.frozen_parameter": True}, ValueError, "Invalid option"),  # op_sdk's paths are not its
    ({"capture_limit": 0}, ValueError, "Please set value in [1, "),
    ({"capture_limit": "8"}, ValueError, "Please set integer type"),
    ({"force_eager": "yes"}, ValueError, "not in optional list"),
    ({"capture_error_mode": "strict"}, ValueError, "not in optional list ['global', 'thread_local', 'relaxed']"),
    ({"mode": "max-autotune"}, ValueError, "not in optional list ['npugraph_ex']"),
    ({"data_dump_dir": "/no/such/dir"}, FileNotFoundError, "Please set legal dir path"),
    ({"super_kernel_optimize_options": 1}, TypeError, "must be dict or None"),
    ({"_vllm_aclnn_static_kernel_sym_range": [1, "2"]}, TypeError, "int list"),
    ({"post_grad_custom_pre_pass": 3}, TypeError, "value must be Callable or None, got <class 'int'>"),
])
def test_validation_as_npugraph_ex_validates(options, exc, words):
    with pytest.raises(exc, match=words.replace("[", r"\[").replace("(", r"\(")):
        ex.config_from_options(options)
    torch._dynamo.reset()
    with pytest.raises(Exception, match=words.replace("[", r"\[").replace("(", r"\(")):
        torch.compile(layer, backend="npugraph_ex", options=options)(*layer_inputs())


def test_user_passes_get_npugraph_exs_config():
    seen = []

    def pre(gm, example_inputs, config):
        seen.append(("pre", config.capture_limit.value, npu.npu_add_rms_norm.default in
                     [n.target for n in gm.graph.nodes]))

    def post(gm, example_inputs, config):
        seen.append(("post", type(config).__name__))

    torch._dynamo.reset()
    options = {"post_grad_custom_pre_pass": pre, "post_grad_custom_post_pass": post,
               "capture_limit": 3}
    torch.compile(layer, backend="npugraph_ex", options=options)(*layer_inputs())
    assert seen == [("pre", "3", True), ("post", "CompilerConfig")]  # read back as a str, as there


def test_options_without_effect_here_are_said(caplog):
    torch._dynamo.reset()
    options = {"static_kernel_compile": True, "clone_output": True}
    with caplog.at_level(logging.INFO, logger="op_sdk"):
        torch.compile(layer, backend="npugraph_ex", options=options)(*layer_inputs())
    said = [r.getMessage() for r in caplog.records if "no effect off the NPU" in r.getMessage()]
    assert said and "static_kernel_compile=True" in said[0] and "clone_output=True" in said[0]
    assert ex.CompilerConfig().no_effect_here() == []


def test_compile_fx_and_get_npu_backend_forms():
    args = layer_inputs()
    gm = torch.fx.symbolic_trace(layer)
    cfg = ex.CompilerConfig()
    cfg.pattern_fusion_pass = False
    torch._dynamo.reset()
    _close(torch.compile(layer, backend=ex.get_npu_backend_ex(compiler_config=cfg))(*args), layer(*args))
    with pytest.raises(ValueError, match="not in optional list"):
        cfg.remove_cat_ops = "yes"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        cfg.nope = 1
    compiled = ex.compile_fx(gm, args, {"remove_noop_ops": False})
    _close(compiled(*args), layer(*args))
