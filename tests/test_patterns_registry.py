"""register_replacement (TorchAir's semantics), scoped registries, lazy registration,
canonical spellings and verify_replacement."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import op_sdk
from op_sdk.patterns import (
    DuplicatePatternError,
    PatternRegistry,
    ReplacementMismatch,
    register_replacement,
    registry as registry_module,
    verify_replacement,
)
from tests.fusion_harness import assert_fused_close, compile_and_run, config

aten, npu = torch.ops.aten, torch.ops.npu
MODES = ["reduce-overhead", "max-autotune"]


@pytest.fixture(autouse=True)
def fresh_user_registry(monkeypatch):
    """Each test gets its own process-wide user registry (TorchAir's global one)."""
    monkeypatch.setattr(registry_module, "_USER", [])


def gated(x, y):
    return torch.sigmoid(x) * y


def gated_replacement(x, y):
    return y / (1 + torch.exp(-x))


def gated_wrong(x, y):
    return y / (1 + torch.exp(x))


# These replacements are rewrites, not fusions (sigmoid * y -> four operators, a cast ->
# another cast): the benefit model, deciding them (fusion_benefit_scope "all"), rightly
# predicts they cost time or save none and refuses them. By default it decides the
# native_ops rewrites only (tests/test_fusion_outcome.py); the tests here are about
# registration and matching, and say so with the model off as well.
NO_MODEL = {"experimental_config__fusion_benefit_threshold_us": None}


def _xy(n=16):
    return [torch.randn(4, n), torch.randn(4, n)]


def model(x, y):
    return gated(x, y) + 1


@pytest.mark.parametrize("mode", MODES)
def test_user_pattern_fires(mode):
    assert op_sdk.register_replacement(gated, gated_replacement, _xy()) is True
    inputs = _xy(24)  # other sizes than the example
    result = compile_and_run(model, inputs, config(mode, **NO_MODEL))
    assert result.report.match_count("user:gated", "gated_replacement") == 1
    assert aten.sigmoid.default not in result.targets and aten.exp.default in result.targets
    torch.testing.assert_close(result.outputs, model(*inputs))


def test_pattern_fusion_pass_false_disables_user_patterns():
    register_replacement(gated, gated_replacement, _xy())
    result = compile_and_run(model, _xy(), config(experimental_config__pattern_fusion_pass=False))
    assert result.report.match_count() == 0 and aten.sigmoid.default in result.targets


def test_register_twice_is_a_no_op():
    assert register_replacement(gated, gated_replacement, _xy()) is True
    assert register_replacement(gated, gated_replacement, _xy()) is False
    # other example sizes (another model's hidden size): still the same pattern
    assert register_replacement(gated, gated_replacement, _xy(64)) is False
    assert len(registry_module.user_registry()) == 1
    result = compile_and_run(model, _xy(), config(**NO_MODEL))
    assert result.report.match_count() == 1


def test_conflicting_replacement_is_an_error_unless_skipped():
    register_replacement(gated, gated_replacement, _xy())

    def other_replacement(x, y):
        return torch.sigmoid(x).mul(y)

    with pytest.raises(DuplicatePatternError, match="skip_duplicates=True"):
        register_replacement(gated, other_replacement, _xy())
    assert register_replacement(gated, other_replacement, _xy(), skip_duplicates=True) is False


def test_user_extra_check_veto_is_reported():
    def only_wide(match):
        return match.kwargs["x"].meta["val"].shape[-1] >= 32

    register_replacement(gated, gated_replacement, _xy(), extra_check=only_wide)
    result = compile_and_run(model, _xy(16), config(**NO_MODEL))
    assert result.report.match_count() == 0
    [miss] = result.report.misses("user:gated")
    assert miss.kind == "check" and miss.check == "only_wide"
    assert compile_and_run(model, _xy(32), config(**NO_MODEL)).report.match_count() == 1


def test_replacement_rejecting_the_inputs_is_vetoed_not_a_crash():
    """A replacement whose operator refuses the matched inputs is a near miss, not a
    compile error (TorchAir would fail tracing the replacement)."""
    def bmm_t(x, w):
        return torch.bmm(x, w).transpose(0, 1)

    def fused(x, w):
        return npu.npu_transpose_batchmatmul(x, w)

    with PatternRegistry("scoped") as scope:
        example = torch.randn(2, 8, 8)
        register_replacement(bmm_t, fused, [example, example])  # one object twice: fine
        backend = op_sdk.get_npu_backend(compiler_config=config())
    assert backend.patterns is scope
    f64 = [torch.randn(2, 3, 8, dtype=torch.float64), torch.randn(2, 8, 4, dtype=torch.float64)]
    result = compile_and_run(bmm_t, f64, backend.config, backend=backend)
    [miss] = result.report.misses("user:bmm_t")
    assert miss.kind == "fused_op" and "npu_transpose_batchmatmul" in miss.reason
    torch.testing.assert_close(result.outputs, bmm_t(*f64))
    f32 = [x.float() for x in f64]
    assert compile_and_run(bmm_t, f32, backend.config, backend=backend).report.match_count(
        "user:bmm_t") == 1


# ---- scoped registries ------------------------------------------------------------------

class Layer(torch.nn.Module):
    """A layer whose constructor registers its own pattern (as model code often does)."""

    def __init__(self, hidden):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(hidden, hidden) / hidden, requires_grad=False)
        register_replacement(gated, gated_replacement, [torch.randn(2, hidden)] * 2)

    def forward(self, x):
        return gated(x @ self.w, x) + torch.tanh(x) * x


def tanh_gate(x, y):
    return torch.tanh(x) * y


def tanh_gate_replacement(x, y):
    return y * (2 * torch.sigmoid(2 * x) - 1)


def test_two_models_two_scopes_no_duplicates_no_stale_patterns():
    """A draft and a target model (different hidden sizes, different configs) compile in
    one process, each with the patterns registered in its own scope."""
    with PatternRegistry("target") as target_patterns:
        target = Layer(64)
        register_replacement(tanh_gate, tanh_gate_replacement, [torch.randn(2, 64)] * 2)
        target_backend = op_sdk.get_npu_backend(
            compiler_config=config("max-autotune", **NO_MODEL))
    with PatternRegistry("draft") as draft_patterns:
        draft = Layer(16)  # registers gated again: no duplicate-pattern error
        Layer(16)          # twice, even
        draft_backend = op_sdk.get_npu_backend(
            compiler_config=config("reduce-overhead", **NO_MODEL))
    assert len(target_patterns) == 2 and len(draft_patterns) == 1
    assert len(registry_module.user_registry()) == 0  # nothing leaked into the global one

    xt, xd = torch.randn(5, 64), torch.randn(5, 16)
    rt = compile_and_run(target, [xt], target_backend.config, backend=target_backend)
    rd = compile_and_run(draft, [xd], draft_backend.config, backend=draft_backend)
    assert rt.report.match_count("user:gated") == 1
    assert rt.report.match_count("user:tanh_gate") == 1
    assert rd.report.match_count("user:gated") == 1
    assert rd.report.match_count("user:tanh_gate") == 0  # the target's pattern stays there
    assert aten.tanh.default in rd.targets
    torch.testing.assert_close(rt.outputs, target(xt), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(rd.outputs, draft(xd), rtol=1e-4, atol=1e-5)
    # and the target, compiled again after the draft, still has exactly its patterns
    rt2 = compile_and_run(target, [torch.randn(9, 64)], target_backend.config,
                          backend=target_backend)
    assert rt2.report.match_count() == 2


def test_default_fusions_do_not_depend_on_model_size():
    """The default patterns are traced once and match any hidden size."""
    def layer(x1, x2, gamma, smooth):
        y, _, xo = npu.npu_add_rms_norm(x1, x2, gamma)
        return npu.npu_dynamic_quant(y, smooth_scales=smooth), xo

    for hidden in (32, 96):
        h = torch.float16
        inputs = [torch.randn(3, 5, hidden, dtype=h), torch.randn(3, 5, hidden, dtype=h),
                  torch.randn(hidden, dtype=h), torch.rand(hidden, dtype=h) + 0.5]
        result = compile_and_run(layer, inputs)
        assert result.report.match_count("add_rms_norm_dynamic_quant") == 1
        assert_fused_close(result.outputs, layer(*inputs), inputs)


def test_default_patterns_registered_lazily_once():
    code = textwrap.dedent("""
        import torch, op_sdk
        from op_sdk.patterns import built_fusions, DEFAULT_FUSIONS
        assert built_fusions() == {}
        npu = torch.ops.npu
        def f(x1, x2, g):
            y, _, xo = npu.npu_add_rms_norm(x1, x2, g)
            return y.view(-1, y.size(-1)).float(), xo
        h = torch.float16
        args = (torch.randn(2, 3, 32, dtype=h), torch.randn(2, 3, 32, dtype=h),
                torch.randn(32, dtype=h))
        cfg = op_sdk.CompilerConfig(); cfg.mode = "reduce-overhead"
        torch.compile(f, backend=op_sdk.get_npu_backend(compiler_config=cfg))(*args)
        from op_sdk.patterns.native import NATIVE_RULES
        built = built_fusions()
        assert set(built) == {f.name for f in DEFAULT_FUSIONS + NATIVE_RULES}, built
        regs = [f.registry() for f in DEFAULT_FUSIONS]
        torch._dynamo.reset()
        torch.compile(f, backend=op_sdk.get_npu_backend(compiler_config=cfg))(*args)
        assert [f.registry() for f in DEFAULT_FUSIONS] == regs  # the same objects: once
        assert built_fusions() == built
        print("ok")
    """)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=root)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]


# ---- canonical spellings ----------------------------------------------------------------

def cast_rows(x):
    return x.view(-1, x.size(-1)).to(torch.float32).transpose(0, 1)


def cast_rows_replacement(x):
    return x.reshape(-1, x.size(-1)).t().float()


@pytest.mark.parametrize("mode", MODES)
def test_user_pattern_matches_either_spelling(mode):
    """Written with view / .to() / transpose: matches both AOT spellings (aten.view /
    _to_copy / transpose without decompositions, reshape / convert_element_type /
    permute after Inductor's)."""
    register_replacement(cast_rows, cast_rows_replacement, [torch.randn(2, 3, 8,
                                                                        dtype=torch.float16)])
    x = torch.randn(4, 5, 8, dtype=torch.float16)

    def fn(x):
        return cast_rows(x) * 2

    result = compile_and_run(fn, [x], config(mode, **NO_MODEL))
    assert result.report.match_count("user:cast_rows") == 1, result.report.summary()
    torch.testing.assert_close(result.outputs, fn(x))


def hand_built_search(x):
    pass  # TorchAir's hand-built patterns leave the search function empty


def hand_built_replace(x):
    return npu._npu_dtype_cast(x.reshape(-1, x.size(-1)), torch.float32)


@pytest.mark.parametrize("mode", MODES)
def test_hand_built_pattern_in_torchair_spelling(mode):
    """A TorchAir-style search_fn_pattern written with aten.view / aten._to_copy still
    matches: hand-built patterns are put in the canonical spelling too."""
    from torch._inductor.pattern_matcher import CallFunction, Ignored, KeywordArg

    pattern = CallFunction(aten._to_copy.default,
                           CallFunction(aten.view.default, KeywordArg("x"), Ignored()),
                           dtype=torch.float32)
    register_replacement(hand_built_search, hand_built_replace,
                         [torch.randn(2, 3, 8, dtype=torch.float16)], search_fn_pattern=pattern)
    x = torch.randn(4, 5, 8, dtype=torch.float16)

    def fn(x):
        return x.view(-1, x.size(-1)).to(torch.float32) + 1

    result = compile_and_run(fn, [x], config(mode, **NO_MODEL))
    assert result.report.match_count("user:hand_built_search") == 1, result.report.summary()
    assert npu._npu_dtype_cast.default in result.targets
    torch.testing.assert_close(result.outputs, fn(x))


def test_canonicalize_rewrites():
    from op_sdk.patterns.canonical import canonicalize

    def fn(x):
        return x.view(6, 4).transpose(0, 1).to(torch.float32), x.to("meta")

    gm = torch.fx.experimental.proxy_tensor.make_fx(fn, {})(torch.randn(2, 3, 4,
                                                                        dtype=torch.float16))
    assert canonicalize(gm.graph) == 3
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == [aten.reshape.default, aten.permute.default,
                       torch.ops.prims.convert_element_type.default, aten._to_copy.default]


# ---- verify_replacement -----------------------------------------------------------------

def test_verify_replacement_passes_and_varies_shapes_and_dtypes():
    report = op_sdk.verify_replacement(gated, gated_replacement, _xy())
    assert report.ok and not report.failures
    shapes = {tuple(c.shapes[0]) for c in report.cases}
    dtypes = {c.dtype for c in report.cases}
    assert len(shapes) >= 3 and dtypes == {torch.float32, torch.float16, torch.bfloat16}


def test_verify_replacement_catches_a_wrong_replacement():
    with pytest.raises(ReplacementMismatch, match="gated_wrong"):
        verify_replacement(gated, gated_wrong, _xy())
    report = verify_replacement(gated, gated_wrong, _xy(), raise_on_failure=False)
    assert not report.ok and report.failures


def test_verify_replacement_int_outputs_within_one_step():
    def quant(x):
        return torch.round(x * 10).to(torch.int8)

    def quant_off_by_one(x):
        return (torch.round(x * 10) + 1).to(torch.int8)

    def quant_off_by_two(x):
        return (torch.round(x * 10) + 2).to(torch.int8)

    x = [torch.randn(4, 8)]
    assert verify_replacement(quant, quant_off_by_one, x, dtypes=[torch.float32]).ok
    with pytest.raises(ReplacementMismatch, match="2 steps"):
        verify_replacement(quant, quant_off_by_two, x, dtypes=[torch.float32])


def test_verify_replacement_needs_a_case_that_runs():
    def refuses(x, y):
        raise RuntimeError("never")

    report = verify_replacement(gated, refuses, _xy(), raise_on_failure=False)
    assert not report.ok and all(c.status == "skipped" for c in report.cases)
