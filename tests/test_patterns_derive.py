"""Fusions derived from operator declarations (``define_op(..., composite=)``).

The default fusions' variants are derived from their fused operators' composites: the
derivation must be faithful, i.e. produce the variants the fusion modules spelled out by
hand before (kept below, only here): the same names in the same order, the same pattern
arguments and scalars, and the same traced search and replacement graphs."""

from __future__ import annotations

import itertools

import pytest
import torch

import op_sdk
from op_sdk.composite import Composite, Spelling
from op_sdk.patterns import DEFAULT_FUSIONS, get_fusion
from op_sdk.patterns.fusion import generated_variant
from op_sdk.patterns.tracing import trace_canonical

npu = torch.ops.npu


# ---- the hand-written variants the derivation replaces ---------------------------------------

def _f1_variants(flatten: bool):
    args = ("x1", "x2", "gamma") if flatten else ("x1", "x2", "gamma", "smooth_scales")

    def make(x_out, eps):
        def search(x1, x2, gamma, *rest):
            *smooth, eps_args = rest
            y, _, xo = npu.npu_add_rms_norm.default(x1, x2, gamma, *eps_args)
            if flatten:
                y1, scale1 = npu.npu_dynamic_quant.default(y.flatten(0, 1))
                scale1 = scale1.view(-1, 1)
            else:
                y1, scale1 = npu.npu_dynamic_quant.default(y, smooth_scales=smooth[0])
            return (y1, scale1, xo) if x_out else (y1, scale1)

        def replace(x1, x2, gamma, *rest):
            *smooth, eps_args = rest
            kw = {"smooth_scale1": smooth[0]} if smooth else {}
            if eps_args:
                kw["epsilon"] = eps_args[0]
            y1, _, xo, scale1, _ = npu.npu_add_rms_norm_dynamic_quant.default(
                x1, x2, gamma, output_mask=[True, False], **kw)
            if flatten:
                y1, scale1 = y1.flatten(0, 1), scale1.view(-1, 1)
            return (y1, scale1, xo) if x_out else (y1, scale1)

        name = ("eps+" if eps else "") + ("x_out" if x_out else "no_x_out")
        return generated_variant(name, search, replace, args, eps)

    return [make(x_out, eps) for x_out in (True, False) for eps in (False, True)]


def _f3_variants():
    def make(cast, view, eps, x_out):
        def search(x1, x2, gamma, eps_args):
            y, _, xo = npu.npu_add_rms_norm.default(x1, x2, gamma, *eps_args)
            t = y.view(-1, y.size(-1)) if view else y
            t = (npu._npu_dtype_cast.default(t, torch.float32) if cast == "npu_dtype_cast"
                 else t.to(torch.float32))
            return (t, y, xo) if x_out else (t, y)

        def replace(x1, x2, gamma, eps_args):
            y1, y2, _, xo = npu.npu_add_rms_norm_cast.default(x1, x2, gamma, *eps_args)
            t = y1.view(-1, y1.size(-1)) if view else y1
            return (t, y2, xo) if x_out else (t, y2)

        name = "+".join([cast] + (["view"] if view else []) + (["eps"] if eps else [])
                        + (["x_out"] if x_out else ["no_x_out"]))
        return generated_variant(name, search, replace, ("x1", "x2", "gamma"), eps)

    return [make(*c) for c in itertools.product(("npu_dtype_cast", "to"), (True, False),
                                                 (False, True), (True, False))]


_X1_FORMS = {
    "x1": lambda x1: x1,
    "transpose(x1)": lambda x1: x1.transpose(0, 1),
    "expand(transpose(x1))": lambda x1: (lambda t: t.expand(t.shape))(x1.transpose(0, 1)),
    "view(expand(transpose(x1)))":
        lambda x1: (lambda t: t.expand(t.shape).view(t.shape))(x1.transpose(0, 1)),
}


def _f4_variants():
    def make(x1_form, view):
        def search(x1, x2, eps_args):
            y = torch.bmm(_X1_FORMS[x1_form](x1), x2)
            return (y.view(y.shape) if view else y).transpose(0, 1)

        def replace(x1, x2, eps_args):
            perm = {"perm_x1": [1, 0, 2]} if x1_form != "x1" else {}
            return npu.npu_transpose_batchmatmul.default(x1, x2, **perm)

        inner = "bmm" if x1_form == "x1" else f"bmm({x1_form})"
        name = f"transpose(view({inner}))" if view else f"transpose({inner})"
        return generated_variant(name, search, replace, ("x1", "x2"))

    return [make(f, v) for f, v in (("view(expand(transpose(x1)))", True),
                                    ("expand(transpose(x1))", False), ("transpose(x1)", False),
                                    ("x1", True), ("x1", False))]


def _f5_variants():
    def make(x_out, eps):
        def search(x1, x2, gamma, scales, zero_points, eps_args):
            y, _, xo = npu.npu_add_rms_norm.default(x1, x2, gamma, *eps_args)
            q = npu.npu_quantize.default(y, scales, zero_points, 1, -1, True)
            return (q, xo) if x_out else q

        def replace(x1, x2, gamma, scales, zero_points, eps_args):
            kw = {"epsilon": eps_args[0]} if eps_args else {}
            y1, _, xo = npu.npu_add_rms_norm_quant.default(x1, x2, gamma, scales, zero_points,
                                                           axis=-1, **kw)
            return (y1, xo) if x_out else y1

        name = ("eps+" if eps else "") + ("x_out" if x_out else "no_x_out")
        return generated_variant(name, search, replace,
                                 ("x1", "x2", "gamma", "scales", "zero_points"), eps)

    return [make(x_out, eps) for x_out in (True, False) for eps in (False, True)]


HAND_WRITTEN = {
    "add_rms_norm_dynamic_quant": lambda: _f1_variants(False),
    "add_rms_norm_dynamic_quant_flatten": lambda: _f1_variants(True),
    "add_rms_norm_cast": _f3_variants,
    "transpose_batchmatmul": _f4_variants,
    "add_rms_norm_quant": _f5_variants,
}


def _code(fn, inputs) -> list:
    """The traced graph, node names aside: (op, target, args, kwargs) per node, with a
    node argument written as its position."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    fake = [mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    with mode:
        graph = trace_canonical(fn, fake).graph
    index = {node: i for i, node in enumerate(graph.nodes)}
    ref = lambda a: f"%{index[a]}" if isinstance(a, torch.fx.Node) else a  # noqa: E731
    return [(n.op, str(n.target), torch.fx.node.map_aggregate(n.args, ref),
             torch.fx.node.map_aggregate(n.kwargs, ref)) for n in graph.nodes]


def test_every_default_fusion_is_derived():
    # TorchAir's five, compared with their former hand-written variants below, and the ones
    # op_sdk adds (swiglu_quant, add_rms_norm_quant_bias, rms_norm_rope, dequant_swiglu_quant,
    # the MX norms), derived from the start
    assert set(HAND_WRITTEN) <= {f.name for f in DEFAULT_FUSIONS}
    assert {f.name for f in DEFAULT_FUSIONS} - set(HAND_WRITTEN) == {
        "swiglu_quant", "add_rms_norm_quant_bias", "rms_norm_rope", "dequant_swiglu_quant",
        "add_rms_norm_dynamic_mx_quant", "rms_norm_dynamic_mx_quant"}
    for fusion in DEFAULT_FUSIONS:
        namespace, name = fusion.fused_qualname.split("::")
        assert op_sdk.get_op(name, namespace).composite is not None, fusion.name


@pytest.mark.parametrize("name", sorted(HAND_WRITTEN))
def test_derived_variants_equal_the_hand_written(name):
    fusion = get_fusion(name)
    derived, written = fusion.variants(), HAND_WRITTEN[name]()
    assert [v.name for v in derived] == [v.name for v in written]
    for new, old in zip(derived, written):
        assert new.argnames == old.argnames, new.name
        assert new.scalar_workaround == old.scalar_workaround, new.name
        for dtype in fusion.dtypes:
            inputs = fusion.inputs(new, dtype)
            assert _code(new.search_fn, inputs) == _code(old.search_fn, inputs), new.name
            assert _code(new.replace_fn, inputs) == _code(old.replace_fn, inputs), new.name


def test_derived_replacement_before_any_search_call():
    """The replacement learns the composite's outputs itself when the search never ran."""
    from op_sdk.patterns import derive

    fusion = get_fusion("add_rms_norm_dynamic_quant_flatten")
    derive._LEARNED.clear()
    for v in derive.derived_variants("npu_add_rms_norm_dynamic_quant",
                                     inputs=("x1", "x2", "gamma"))():
        inputs = fusion.inputs(v)
        out, ref = v.replace_fn(*inputs), v.search_fn(*inputs)
        assert [(t.shape, t.dtype) for t in out] == [(t.shape, t.dtype) for t in ref], v.name


def test_composite_declaration_is_validated():
    def fn(x, epsilon=1e-6, *, cast=None):
        return x

    with pytest.raises(ValueError, match="not a keyword-only"):
        Composite(fn, outputs=("y",), spellings={"view": {"": fn}})
    with pytest.raises(ValueError, match="not a parameter with a default"):
        Composite(fn, outputs=("y",), defaults=("x",))
    with pytest.raises(ValueError, match="optional output"):
        Composite(fn, outputs=("y",), optional_outputs=("x_out",))
    with pytest.raises(ValueError, match=r"moves a view onto \['w'\], which are not arguments"):
        Composite(fn, outputs=("y",), spellings={"cast": {"t": Spelling(fn, inputs={"w": fn})}})
    with pytest.raises(ValueError, match="a marker is for a scalar of defaults"):
        Composite(fn, outputs=("y",), defaults=("epsilon",), markers={"epsilon": 1e-6})
    with pytest.raises(ValueError, match="a marker is for a scalar of defaults"):
        Composite(fn, outputs=("y",), markers={"epsilon": 2e-6})
    with pytest.raises(TypeError, match="op_sdk.Composite"):
        op_sdk.define_op("composite_type_check(Tensor x) -> Tensor", namespace="op_sdk_derive_t",
                         reference=lambda x: x, composite=fn)
    assert isinstance(Spelling(fn).outputs, dict)


# ---- a plugin operator's derived fusion (examples/plugin_fused_op.py) -------------------------

@pytest.fixture
def fresh_user_registry(monkeypatch):
    """A process-wide user registry of this test's own (as TorchAir's global one)."""
    from op_sdk.patterns import registry as registry_module

    monkeypatch.setattr(registry_module, "_USER", [])


def _swiglu_quant(g, u):
    q, s = npu.npu_dynamic_quant(torch.nn.functional.silu(g) * u)
    return q, s


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_plugin_operator_fuses_from_its_declaration(mode, fresh_user_registry):
    from op_sdk.patterns import derive, user_registry
    from tests.fusion_harness import assert_fused_close, compile_and_run, config
    from tests.plugin_example import load

    load()
    fused = torch.ops.my_ops.silu_mul_quant.default
    # the plugin's one-line opt-in traced nothing: the fusion waits for the first compile
    assert len(user_registry()) == 0
    assert [f.name for f in derive.pending(user_registry())] == ["silu_mul_quant"]
    g, u = torch.randn(2, 9, 64, dtype=torch.bfloat16), torch.randn(2, 9, 64, dtype=torch.bfloat16)
    result = compile_and_run(_swiglu_quant, [g, u], config(mode))
    report = result.report
    assert report.match_count() == 1, report.summary()
    assert report.match_count("silu_mul_quant") == 1, report.summary()
    assert op_sdk.explain(result.backend).patterns == {"silu_mul_quant": 1}
    variant = "composite+decomposed" if mode == "max-autotune" else "composite"
    assert report.match_count("silu_mul_quant", variant) == 1, report.summary()
    assert fused in result.targets
    gone = {npu.npu_dynamic_quant.default, torch.ops.aten.silu.default, torch.ops.aten.mul.Tensor,
            torch.ops.aten.exp.default}
    assert not gone & set(result.targets), result.targets
    assert_fused_close(result.outputs, _swiglu_quant(g, u), [g, u])
    assert derive.pending(user_registry()) == []
    assert user_registry().uuid() is not None  # the derived functions have content digests


def test_plugin_fusion_fp32_decomposed_and_verified(fresh_user_registry):
    """fp32 inputs: Inductor's silu decomposition has no converts, a variant of its own;
    every variant's replacement computes what its pattern does."""
    from op_sdk.patterns import derive, user_registry, verify_replacement
    from tests.fusion_harness import assert_fused_close, compile_and_run, config
    from tests.plugin_example import load

    load()
    g, u = torch.randn(5, 64), torch.randn(5, 64)
    result = compile_and_run(_swiglu_quant, [g, u], config("max-autotune"))
    assert result.report.match_count("silu_mul_quant", "composite+decomposed+float32") == 1, \
        result.report.summary()
    assert_fused_close(result.outputs, _swiglu_quant(g, u), [g, u])
    names = {r.variant for r in user_registry().records}
    assert names == {"composite", "composite+decomposed", "composite+decomposed+float32"}
    fusion = next(f for f in derive._FOR_USER if f.name == "silu_mul_quant")
    for v in fusion.variants():
        for dtype in (torch.bfloat16, torch.float16):
            report = verify_replacement(v.search_fn, v.replace_fn, fusion.inputs(v, dtype),
                                        dtypes=[dtype], size_scales=(1, 3), seeds=(0,))
            assert report.ok, str(report)


def test_plugin_import_traces_nothing():
    """The plugin's declaration and its register_fusion line import no Inductor."""
    import subprocess
    import sys

    code = ("import sys; from tests.plugin_example import load; load(); "
            "print('torch._inductor' in sys.modules, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=str(__import__("pathlib").Path(__file__).parent.parent))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-2:] == ["False", "False"], out.stdout


def test_register_fusion_into_a_scope_dynamic_shapes(fresh_user_registry):
    """register_fusion goes to the current scope like register_replacement; lazy=False
    registers at once; a model compiled with dynamic=True fuses too."""
    from op_sdk.patterns import derive, user_registry
    from tests.fusion_harness import assert_fused_close, compile_and_run, config
    from tests.plugin_example import load

    plugin = load()
    with op_sdk.PatternRegistry("plugin_scope") as scope:
        derive.register_fusion(plugin.silu_mul_quant, name="swiglu_quant")
        assert len(scope) == 0 and [f.name for f in derive.pending(scope)] == ["swiglu_quant"]
        cfg = config()
        backend = op_sdk.get_npu_backend(compiler_config=cfg)
    eager = op_sdk.PatternRegistry("plugin_now")
    derive.register_fusion("my_ops::silu_mul_quant", registry=eager, lazy=False)
    assert {r.variant for r in eager.records} >= {"composite", "composite+decomposed"}
    g, u = torch.randn(33, 64, dtype=torch.float16), torch.randn(33, 64, dtype=torch.float16)
    result = compile_and_run(_swiglu_quant, [g, u], cfg, backend=backend, dynamic=True)
    assert result.report.match_count("swiglu_quant") == 1, result.report.summary()
    assert result.report.match_count("silu_mul_quant") == 0  # the user registry is not this one
    assert torch.ops.my_ops.silu_mul_quant.default in result.targets
    assert_fused_close(result.outputs, _swiglu_quant(g, u), [g, u])
    assert len(user_registry()) == 0


def test_marker_makes_a_scalar_the_operator_takes():
    """npu_dynamic_mx_quant's dst_type: the usual marker (296 + 7) is no dtype the operator
    takes, so the composite names 292; the variant captures the graph's dst_type with it."""
    fusion = get_fusion("add_rms_norm_dynamic_mx_quant")
    for v in fusion.variants():
        assert v.scalar_workaround["dst_type"] == 292 and "scale_alg" not in v.argnames
        inputs = fusion.inputs(v, torch.bfloat16)
        # the captured value reaches the fused operator (float4: scale_alg 0 only)
        for dst in (291,) if "sa1" in v.name else (291, 296):
            inputs[v.argnames.index("dst_type")] = dst
            out, ref = v.replace_fn(*inputs), v.search_fn(*inputs)
            for a, b in zip(out, ref):
                assert a.dtype == b.dtype and torch.equal(a.view(torch.uint8), b.view(torch.uint8)), \
                    (v.name, dst)
