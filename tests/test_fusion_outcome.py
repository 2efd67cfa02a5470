"""What a compile says about its fusions: one INFO line per graph on the ``op_sdk`` logger
(also the head of the report's graph summary and of ``op_sdk.explain``), naming what fused
and, where something did not, why and what to set; the default fusions and a user's
``register_fusion`` apply as TorchAir applies them, the benefit model deciding the
automatic native_ops rewrites only (``experimental_config.fusion_benefit_scope``)."""

from __future__ import annotations

import logging

import torch

import op_sdk
from tests.fusion_harness import compile_and_run, config
from tests.test_compiler_pipeline import layer, layer_inputs
from tests.test_native_ops import hf_norm

npu = torch.ops.npu


def _lines(caplog):
    """The INFO lines of the compiles' graphs (a cache hit adds one line of its own)."""
    return [r.getMessage() for r in caplog.records
            if r.name == "op_sdk" and r.levelno == logging.INFO
            and r.getMessage().startswith("op_sdk compile #") and " graph: " in r.getMessage()]


def test_a_refused_native_rewrite_says_why_and_what_to_set(caplog):
    """The Qwen2 case: torch-native norms on the CPU under max-autotune, which the benefit
    model leaves to Inductor."""
    x = torch.randn(4, 16, 64, dtype=torch.bfloat16)
    w = torch.rand(64, dtype=torch.bfloat16) + 0.5
    with caplog.at_level(logging.INFO, logger="op_sdk"):
        res = compile_and_run(hf_norm, [x, w], config("max-autotune"))
    [line] = _lines(caplog)
    assert "no fusion applied; the benefit model refused native_rms_norm x1: it predicts " \
           "no gain on this CPU; set experimental_config.fusion_benefit_device = 'npu' to " \
           "see the NPU plan, or fusion_benefit_threshold_us = None to apply every match" \
           in line, line
    graph = res.report.graphs[0]
    assert graph.outcome() in line and graph.outcome() in graph.summary().splitlines()[0]
    assert graph.outcome() in str(op_sdk.explain(res.backend))
    # planned for the NPU the rewrite applies, and the line says so
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="op_sdk"):
        compile_and_run(hf_norm, [x, w], config(
            "max-autotune", experimental_config__fusion_benefit_device="npu"))
    [line] = _lines(caplog)
    assert line.endswith("inference graph: fused native_rms_norm x1"), line


def test_default_fusions_apply_without_the_model_and_say_so(caplog):
    """A threshold no fusion can pass: by default the fusions apply all the same (the
    model decides native_ops only); with fusion_benefit_scope "all" they are refused and
    the line names them."""
    kw = {"experimental_config__fusion_benefit_threshold_us": 1e6}
    with caplog.at_level(logging.INFO, logger="op_sdk"):
        res = compile_and_run(layer, layer_inputs(), config("max-autotune", **kw))
    assert res.report.match_count("add_rms_norm_dynamic_quant") == 1
    assert _lines(caplog)[-1].endswith("fused add_rms_norm_dynamic_quant x1"), _lines(caplog)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="op_sdk"):
        res = compile_and_run(layer, layer_inputs(), config(
            "max-autotune", experimental_config__fusion_benefit_scope="all", **kw))
    assert res.report.match_count() == 0
    line = _lines(caplog)[-1]
    assert "no fusion applied; the benefit model refused add_rms_norm_dynamic_quant x1" in line


def test_nothing_to_fuse_and_passes_off(caplog):
    def plain(x):
        return torch.relu(x) * 2

    with caplog.at_level(logging.INFO, logger="op_sdk"):
        compile_and_run(plain, [torch.randn(4, 8)], config("max-autotune"))
        compile_and_run(plain, [torch.randn(4, 8)], config(
            "max-autotune", experimental_config__pattern_fusion_pass=False,
            experimental_config__native_ops=False))
    first, second = _lines(caplog)
    assert first.endswith("no fusion applied; no fusion pattern or native_ops rule matched "
                          "this graph"), first
    assert "no fusion applied; native_ops off (experimental_config.native_ops=False); " \
           "pattern_fusion off (experimental_config.pattern_fusion_pass=False)" in second


def test_near_misses_are_counted_in_the_line(caplog):
    """An intermediate with another user keeps the fusion from applying: the line counts
    the near miss by kind and points at explain for its reason."""
    def two_users(x1, x2, gamma, smooth):
        y, _, xo = npu.npu_add_rms_norm(x1, x2, gamma)
        q, s = npu.npu_dynamic_quant(y, smooth_scales=smooth)
        return q, s, xo, y * 2  # y is needed beside the quantisation

    with caplog.at_level(logging.INFO, logger="op_sdk"):
        res = compile_and_run(two_users, layer_inputs(), config("max-autotune"))
    line = _lines(caplog)[-1]
    kinds = {m.kind for m in res.report.misses()}
    assert kinds and "near miss" in line and "op_sdk.explain() gives each reason" in line, line
    assert all(f"{k} x" in line for k in kinds), (line, kinds)


def test_transformers_qwen2_in_the_default_mode_says_why_in_one_line(caplog):
    """The newcomer's case: a transformers Qwen2 compiled with op_sdk's default config on
    the CPU. Its norms stay with Inductor (the benefit model's call); the one line per
    graph says so and what to set."""
    from tests.test_native_ops import _tiny

    torch.manual_seed(0)
    model = _tiny("qwen2").eval().to(torch.bfloat16)
    ids = torch.randint(0, 128, (1, 8))
    torch._dynamo.reset()
    backend = op_sdk.get_npu_backend(compiler_config=op_sdk.CompilerConfig())
    with caplog.at_level(logging.INFO, logger="op_sdk"), torch.no_grad():
        torch.compile(model, backend=backend)(ids)
    [line] = _lines(caplog)
    refused = line.split("the benefit model refused ", 1)[-1]
    assert "native_rms_norm x" in refused and "it predicts no gain on this CPU; set " \
        "experimental_config.fusion_benefit_device = 'npu' to see the NPU plan" in line, line
    assert backend.last_report.graphs[0].outcome() in line


def test_a_user_pattern_applies_by_default_as_in_torchair(caplog):
    """A user rewrite the benefit model refuses when it decides every match
    (sigmoid * y -> y / (1 + exp(-x)): more kernels, tests/test_patterns_registry.py)
    applies with the default config, and the line names it."""
    from tests.test_patterns_registry import _xy, gated, gated_replacement, model

    with op_sdk.PatternRegistry("outcome_user") as scope:
        op_sdk.register_replacement(gated, gated_replacement, _xy())
        default = op_sdk.get_npu_backend(compiler_config=config("max-autotune"))
        gated_all = op_sdk.get_npu_backend(compiler_config=config(
            "max-autotune", experimental_config__fusion_benefit_scope="all"))
    assert len(scope) == 1
    with caplog.at_level(logging.INFO, logger="op_sdk"):
        res = compile_and_run(model, _xy(24), backend=default)
    assert res.report.match_count("user:gated") == 1
    assert "fused user:gated x1" in _lines(caplog)[-1]
    res = compile_and_run(model, _xy(24), backend=gated_all)
    assert res.report.match_count("user:gated") == 0
    assert res.report.misses("user:gated", kind="benefit")
