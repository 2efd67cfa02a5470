"""Each default fusion, each variant: it fires (exact count, unfused ops gone, fused op
present, numerics within one int8 step of eager), also under dynamic=True with 257
tokens; each extra check blocks it when violated; an intermediate with another user
blocks it; pattern_fusion_pass=False disables it; the replacement passes
verify_replacement."""

from __future__ import annotations

import operator

import pytest
import torch

from op_sdk.patterns import DEFAULT_FUSIONS, get_fusion, verify_replacement
from tests.fusion_harness import (
    Wrapped,
    assert_fused_close,
    compile_and_run,
    config,
    variant_targets,
)

npu, aten = torch.ops.npu, torch.ops.aten

CASES = [(f, v) for f in DEFAULT_FUSIONS for v in f.variants()]
IDS = [f"{f.name}[{v.name}]" for f, v in CASES]
ACTIVATIONS = {"transpose_batchmatmul": ("x1",), "swiglu_quant": ("x",),
               "rms_norm_rope": ("x", "cos", "sin"),
               "dequant_swiglu_quant": ("x", "activation_scale"),
               "rms_norm_dynamic_mx_quant": ("x",)}
# fusions whose checks need the activation's last dim known (npu_swiglu_quant's bound of
# 8192: a symbolic one is refused, not guarded); no weight of the pattern pins it
STATIC_LAST_DIM = {"swiglu_quant"}


def _noop(fusion, variant) -> bool:
    """The view / expand shapes of bmm+transpose reach the passes only without no-op
    removal (with it they become the plain shapes, tested by those variants)."""
    return fusion.name != "transpose_batchmatmul" or not (
        "view" in variant.name or "expand" in variant.name)


def _inputs(fusion, variant, dtype=None, **sizes):
    return fusion.inputs(variant, dtype or fusion.dtypes[0], **sizes)


def _assert_fired(result, fusion, variant):
    report = result.report
    assert report.match_count() == 1, report.summary()
    assert report.match_count(fusion.name, variant.name) == 1, report.summary()
    gone, present = variant_targets(fusion, variant)
    assert not gone & set(result.targets), (gone & set(result.targets), report.summary())
    assert fusion.fused_overload in result.targets
    assert present <= set(result.targets)


@pytest.mark.parametrize("fusion,variant", CASES, ids=IDS)
def test_fires(fusion, variant):
    inputs = _inputs(fusion, variant)
    result = compile_and_run(variant.search_fn, inputs,
                             config(experimental_config__remove_noop_ops=_noop(fusion, variant)))
    _assert_fired(result, fusion, variant)
    assert_fused_close(result.outputs, variant.search_fn(*inputs), inputs)


@pytest.mark.parametrize("fusion,variant", CASES, ids=IDS)
def test_fires_dynamic_257_tokens(fusion, variant):
    values = fusion.example_inputs(fusion.dtypes[0], variant, **_odd_sizes(fusion))
    acts = ACTIVATIONS.get(fusion.name, ("x1", "x2"))
    model = Wrapped(variant.search_fn, values, acts)
    inputs = [values[a] for a in acts]
    # every dim dynamic, or (STATIC_LAST_DIM) every dim but the last
    dynamic = fusion.name not in STATIC_LAST_DIM
    _mark_leading_dynamic(inputs, dynamic)
    result = compile_and_run(model, inputs,
                             config(experimental_config__remove_noop_ops=_noop(fusion, variant)),
                             dynamic=dynamic)
    _assert_fired(result, fusion, variant)
    assert_fused_close(result.outputs, model(*inputs), inputs)
    # a second token count runs through the same (symbolic) graph
    values2 = fusion.example_inputs(fusion.dtypes[0], variant, **_odd_sizes(fusion, 131))
    inputs2 = [values2[a] for a in acts]
    _mark_leading_dynamic(inputs2, dynamic)
    with torch.no_grad():
        out2 = torch.compile(model, backend=result.backend, dynamic=dynamic)(*inputs2)
    assert_fused_close(out2, model(*inputs2), inputs2)


def _mark_leading_dynamic(inputs, dynamic: bool) -> None:
    """Without dynamic=True: the dims before the last marked dynamic (a model's hidden
    size is fixed by its weights)."""
    if not dynamic:
        for t in inputs:
            for d in range(t.dim() - 1):
                torch._dynamo.mark_dynamic(t, d)


def _odd_sizes(fusion, tokens=257):
    return {"m": tokens} if fusion.name == "transpose_batchmatmul" else {"tokens": tokens}


@pytest.mark.parametrize("fusion,variant", CASES, ids=IDS)
def test_disabled_by_pattern_fusion_pass(fusion, variant):
    inputs = _inputs(fusion, variant)
    result = compile_and_run(variant.search_fn, inputs, config(
        experimental_config__pattern_fusion_pass=False,
        experimental_config__remove_noop_ops=_noop(fusion, variant)))
    assert result.report.match_count() == 0
    assert fusion.fused_overload not in result.targets
    assert result.report.graphs[0].stage("pattern_fusion").skipped


@pytest.mark.parametrize("fusion,variant", CASES, ids=IDS)
def test_verify_replacement(fusion, variant):
    for dtype in fusion.dtypes:
        report = verify_replacement(variant.search_fn, variant.replace_fn,
                                    _inputs(fusion, variant, dtype), dtypes=[dtype],
                                    size_scales=(1, 3), seeds=(0,))
        assert report.ok, str(report)


# ---- the extra checks, one violation each --------------------------------------------

def _norm(x1, x2, gamma, *eps):
    return npu.npu_add_rms_norm(x1, x2, gamma, *eps)


def _h(dtype=torch.float16, tokens=7, hidden=32, lead=2):
    return (torch.randn(lead, tokens, hidden, dtype=dtype), torch.randn(lead, tokens, hidden,
                                                                         dtype=dtype))


def f1_quant_mode(x1, x2, gamma, smooth):
    y, _, xo = _norm(x1, x2, gamma)
    return npu.npu_dynamic_quant(y, smooth_scales=smooth, quant_mode="pertensor"), xo


def f1_fp32(x1, x2, gamma, smooth):
    y, _, xo = _norm(x1, x2, gamma)
    return npu.npu_dynamic_quant(y, smooth_scales=smooth), xo


def f1_gamma_2d(x1, x2, gamma, smooth):
    y, _, xo = _norm(x1, x2, gamma)
    return npu.npu_dynamic_quant(y, smooth_scales=smooth), xo


def f2_smooth(x1, x2, gamma, smooth):
    y, _, xo = _norm(x1, x2, gamma)
    q, s = npu.npu_dynamic_quant(y.flatten(0, 1), smooth_scales=smooth)
    return q, s.view(-1, 1), xo


def f2_not_flatten(x1, x2, gamma):
    y, _, xo = _norm(x1, x2, gamma)
    q, s = npu.npu_dynamic_quant(y.view(y.shape[1], -1))
    return q, s.view(-1, 1), xo


def f2_scale_row(x1, x2, gamma):
    y, _, xo = _norm(x1, x2, gamma)
    q, s = npu.npu_dynamic_quant(y.flatten(0, 1))
    return q, s.view(1, -1), xo


def f2_fp32(x1, x2, gamma):
    y, _, xo = _norm(x1, x2, gamma)
    q, s = npu.npu_dynamic_quant(y.flatten(0, 1))
    return q, s.view(-1, 1), xo


def f3_fp64(x1, x2, gamma):
    y, _, xo = _norm(x1, x2, gamma)
    return y.view(-1, y.size(-1)).to(torch.float64), y, xo


def f3_not_last_dim(x1, x2, gamma):
    y, _, xo = _norm(x1, x2, gamma)
    return y.view(-1, 2 * y.size(-1)).to(torch.float32), y, xo


def f3_fp32(x1, x2, gamma):
    y, _, xo = _norm(x1, x2, gamma)
    return npu._npu_dtype_cast(y.view(-1, y.size(-1)), torch.float32), y, xo


def f4_dims(x1, x2):
    return torch.bmm(x1, x2).transpose(1, 2)


def f4_plain(x1, x2):
    return torch.bmm(x1, x2).transpose(0, 1)


def f4_x1t(x1, x2):
    return torch.matmul(x1.transpose(0, 1), x2).transpose(0, 1)


def f4_view_changes(x1, x2):
    y = torch.bmm(x1, x2)
    return y.view(y.shape[1], y.shape[0], y.shape[2]).transpose(0, 1)


def f5_quantize(axis=-1, dtype=torch.qint8):
    def fn(x1, x2, gamma, scales, zp):
        y, _, xo = _norm(x1, x2, gamma)
        return npu.npu_quantize(y, scales, zp, dtype, axis=axis, div_mode=True), xo
    return fn


def f7_bias():
    def fn(x1, x2, gamma, scales, zp, beta):
        y, _, xo = _norm(x1, x2, gamma)
        return npu.npu_quantize(y + beta, scales, zp, torch.qint8, axis=-1, div_mode=True), xo
    return fn


def _f7_inputs(dtype=torch.float16, beta_shape=(32,), beta_dtype=None, **kw):
    return _f5_inputs(dtype, **kw) + [torch.randn(beta_shape, dtype=beta_dtype or dtype) * 0.1]


def f8_norm_rope(perm=(0, 2, 1, 3)):
    def fn(x, gamma, cos, sin):
        return npu.npu_rotary_mul(npu.npu_rms_norm(x, gamma)[0].permute(*perm), cos, sin)
    return fn


def _f8_inputs(gamma_shape=(16,), cos_shape=(2, 1, 7, 16)):
    """Qwen3's q (B, S, N, D) = (2, 7, 3, 16); cos / sin for the permuted layout."""
    return [torch.randn(2, 7, 3, 16, dtype=torch.bfloat16),
            torch.rand(gamma_shape, dtype=torch.bfloat16) + 0.5,
            torch.randn(cos_shape, dtype=torch.bfloat16), torch.randn(cos_shape, dtype=torch.bfloat16)]


def f9_dequant(quant_mode="pertoken"):
    def fn(x, ws, act, qs):
        t = npu.npu_swiglu(x.float() * ws * act, -1)
        return npu.npu_dynamic_quant(t, smooth_scales=qs, quant_mode=quant_mode)
    return fn


def _f9_inputs(x_dtype=torch.int32, act_shape=(2, 7, 1)):
    """A W8A8 MLP's int32 gate / up accumulator (2, 7, 64) and its scales."""
    x = torch.randint(-3000, 3000, (2, 7, 64), dtype=torch.int32).to(x_dtype)
    return [x, torch.rand(64) * 1e-3, torch.rand(act_shape) + 0.25, torch.rand(32) + 0.5]


def f10_mx(**kw):
    def fn(x1, x2, g):
        y, _, x = npu.npu_add_rms_norm(x1, x2, g)
        q, s = npu.npu_dynamic_mx_quant(y, dst_type=torch.float8_e4m3fn, **kw)
        return q, s, x
    return fn


def f11_mx(**kw):
    def fn(x, g):
        y, _ = npu.npu_rms_norm(x, g)
        return npu.npu_dynamic_mx_quant(y, dst_type=torch.float8_e5m2, **kw)
    return fn


def _f10_inputs(dtype=torch.bfloat16, gamma_shape=(64,)):
    x1, x2 = _h(dtype, 7, 64)
    return [x1, x2, torch.rand(gamma_shape).to(dtype) + 0.5]


def _f5_inputs(dtype=torch.float16, hidden=32, scales_shape=None, zp_dtype=torch.int32,
               scale_dtype=torch.float32, tokens=7):
    x1, x2 = _h(dtype, tokens, hidden)
    return [x1, x2, torch.randn(hidden, dtype=dtype),
            torch.rand(scales_shape or hidden).to(scale_dtype) * 0.02 + 0.01,
            torch.randint(-3, 4, (scales_shape or hidden,)).to(zp_dtype)]


def _f1_inputs(dtype=torch.float16, smooth_dtype=None, gamma_shape=(32,)):
    x1, x2 = _h(dtype)
    return [x1, x2, torch.randn(gamma_shape, dtype=dtype),
            torch.rand(32, dtype=smooth_dtype or dtype) + 0.5]


def _f4(b=3, m=5, k=128, n=128, dtype=torch.float16, x1t=False):
    x1 = torch.randn((m, b, k) if x1t else (b, m, k), dtype=dtype)
    return [x1, torch.randn(b, k, n, dtype=dtype) / k ** 0.5]


VIOLATIONS = [
    # (fusion, check, kind, fn, inputs, config options)
    ("add_rms_norm_dynamic_quant", "dynamic_quant_int8_per_token", "args", f1_quant_mode,
     lambda: _f1_inputs(), {}),
    ("add_rms_norm_dynamic_quant", "half_dtypes", "dtype", f1_fp32,
     lambda: _f1_inputs(torch.float32), {}),
    ("add_rms_norm_dynamic_quant", "half_dtypes", "dtype", f1_fp32,
     lambda: _f1_inputs(torch.float16, smooth_dtype=torch.float32), {}),
    ("add_rms_norm_dynamic_quant", "gamma_1d", "shape", f1_gamma_2d,
     lambda: _f1_inputs(gamma_shape=(7, 32)), {}),
    ("add_rms_norm_dynamic_quant_flatten", "dynamic_quant_int8_per_token", "args", f2_smooth,
     lambda: _f1_inputs(), {}),
    ("add_rms_norm_dynamic_quant_flatten", "y_view_is_flatten_0_1", "shape", f2_not_flatten,
     lambda: _f1_inputs()[:3], {}),
    ("add_rms_norm_dynamic_quant_flatten", "scale_view_is_column", "shape", f2_scale_row,
     lambda: _f1_inputs()[:3], {}),
    ("add_rms_norm_dynamic_quant_flatten", "half_dtypes", "dtype", f2_fp32,
     lambda: _f1_inputs(torch.float32)[:3], {}),
    ("add_rms_norm_dynamic_quant_flatten", "gamma_1d", "shape", f2_fp32,
     lambda: _f1_inputs(gamma_shape=(7, 32))[:3], {}),
    ("add_rms_norm_cast", "cast_to_float32", "dtype", f3_fp64, lambda: _f1_inputs()[:3], {}),
    ("add_rms_norm_cast", "view_is_last_dim", "shape", f3_not_last_dim,
     lambda: _f1_inputs()[:3], {}),
    ("add_rms_norm_cast", "half_dtypes", "dtype", f3_fp32,
     lambda: _f1_inputs(torch.float32)[:3], {}),
    ("transpose_batchmatmul", "transpose_dims_0_1", "args", f4_dims, lambda: _f4(), {}),
    ("transpose_batchmatmul", "dtypes", "dtype", f4_plain, lambda: _f4(dtype=torch.float64),
     {}),
    ("transpose_batchmatmul", "kn_alignment_128", "alignment", f4_plain, lambda: _f4(k=64), {}),
    ("transpose_batchmatmul", "kn_alignment_128", "alignment", f4_plain, lambda: _f4(n=96), {}),
    ("transpose_batchmatmul", "k_limit", "shape", f4_plain,
     lambda: _f4(b=1, m=1, k=65536, n=128), {}),
    ("transpose_batchmatmul", "noop_views", "shape", f4_view_changes,
     lambda: _f4(b=4, m=2), {"experimental_config__remove_noop_ops": False}),
    ("add_rms_norm_quant", "quantize_div_mode_last_axis", "args", f5_quantize(axis=-2),
     lambda: _f5_inputs(scales_shape=7), {}),
    ("add_rms_norm_quant", "output_int8", "dtype", f5_quantize(dtype=torch.quint8),
     lambda: _f5_inputs(), {}),
    ("add_rms_norm_quant", "zero_points_dtype", "dtype", f5_quantize(),
     lambda: _f5_inputs(zp_dtype=torch.int8), {}),
    ("add_rms_norm_quant", "half_dtypes", "dtype", f5_quantize(),
     lambda: _f5_inputs(torch.float32), {}),
    ("add_rms_norm_quant", "tail_alignment_32B", "alignment", f5_quantize(),
     lambda: _f5_inputs(hidden=24), {}),
    ("add_rms_norm_quant", "scales_shape_is_gamma_shape", "shape", f5_quantize(),
     lambda: _f5_inputs(scales_shape=1), {}),
    ("add_rms_norm_quant", "", "fused_op", f5_quantize(),
     lambda: _f5_inputs(scale_dtype=torch.bfloat16), {}),
    # the bias broadcast from a row of another shape, or in another dtype than gamma's
    ("add_rms_norm_quant_bias", "beta_is_gamma_shaped", "shape", f7_bias(),
     lambda: _f7_inputs(beta_shape=(7, 32)), {}),
    ("add_rms_norm_quant_bias", "beta_is_gamma_shaped", "shape", f7_bias(),
     lambda: _f7_inputs(beta_dtype=torch.float32), {}),
    ("add_rms_norm_quant_bias", "half_dtypes", "dtype", f7_bias(),
     lambda: _f7_inputs(torch.float32), {}),
    # a norm over each token's heads and dims; the heads moved elsewhere than before the tokens
    ("rms_norm_rope", "norm_over_last_dim", "shape", f8_norm_rope(),
     lambda: _f8_inputs(gamma_shape=(3, 16)), {}),
    ("rms_norm_rope", "heads_before_tokens", "args", f8_norm_rope((2, 1, 0, 3)),
     lambda: _f8_inputs(cos_shape=(1, 7, 2, 16)), {}),
    # a float x (not a GEMM's int32 accumulator); per-tensor quantisation; a
    # per-column activation scale (the operator's own rule vetoes it)
    ("dequant_swiglu_quant", "int32_accumulator", "dtype", f9_dequant(),
     lambda: _f9_inputs(torch.bfloat16), {}),
    ("dequant_swiglu_quant", "int8_per_token", "args", f9_dequant(quant_mode="pertensor"),
     lambda: _f9_inputs(), {}),
    ("dequant_swiglu_quant", "", "fused_op", f9_dequant(), lambda: _f9_inputs(act_shape=(1, 64)),
     {}),
    # another round mode, axis, block size or a max_low_bound; float32 activations and a 2-D
    # gamma (the operators' own rules veto them)
    ("add_rms_norm_dynamic_mx_quant", "mx_last_dim_blocks_of_32", "args",
     f10_mx(round_mode="rint", block_size=64), lambda: _f10_inputs(), {}),
    ("add_rms_norm_dynamic_mx_quant", "mx_last_dim_blocks_of_32", "args",
     f10_mx(axis=0), lambda: _f10_inputs(), {}),
    ("add_rms_norm_dynamic_mx_quant", "", "fused_op", f10_mx(),
     lambda: _f10_inputs(torch.float32), {}),
    ("add_rms_norm_dynamic_mx_quant", "", "fused_op", f10_mx(),
     lambda: _f10_inputs(gamma_shape=(7, 64)), {}),
    ("rms_norm_dynamic_mx_quant", "mx_last_dim_blocks_of_32", "args",
     f11_mx(scale_alg=1, max_low_bound=1.0), lambda: _f10_inputs()[::2], {}),
    ("rms_norm_dynamic_mx_quant", "", "fused_op", f11_mx(),
     lambda: _f10_inputs(torch.float32)[::2], {}),
]


@pytest.mark.parametrize("name,check,kind,fn,make_inputs,options", VIOLATIONS,
                         ids=[f"{v[0]}-{v[1] or v[2]}-{i}" for i, v in enumerate(VIOLATIONS)])
def test_check_blocks(name, check, kind, fn, make_inputs, options):
    fusion = get_fusion(name)
    inputs = make_inputs()
    result = compile_and_run(fn, inputs, config(**options))
    report = result.report
    assert report.match_count(name) == 0, report.summary()
    assert fusion.fused_overload not in result.targets
    misses = report.misses(name)
    assert misses and misses[0].kind == kind and misses[0].check == check, report.summary()
    assert misses[0].reason
    if fn is not f4_dims:  # the same graph still computes what eager computes
        assert_fused_close(result.outputs, fn(*inputs), inputs)


@pytest.mark.parametrize("name,check,fn,make_inputs", [
    ("add_rms_norm_dynamic_quant_flatten", "y_view_is_flatten_0_1", f2_not_flatten,
     lambda: _f1_inputs()[:3]),
    ("add_rms_norm_cast", "view_is_last_dim", f3_not_last_dim, lambda: _f1_inputs()[:3]),
    # a symbolic hidden size cannot be proven 32-byte aligned: refused, with the reason
    ("add_rms_norm_quant", "tail_alignment_32B", f5_quantize(), lambda: _f5_inputs()),
])
def test_checks_with_symbolic_sizes(name, check, fn, make_inputs):
    inputs = make_inputs()
    result = compile_and_run(fn, inputs, dynamic=True)
    report = result.report
    assert report.match_count(name) == 0, report.summary()
    misses = report.misses(name)
    assert misses and misses[0].check == check, report.summary()
    assert_fused_close(result.outputs, fn(*inputs), inputs)


def test_k_times_b_limit_blocks_the_input_transpose_form():
    """K*B = 65536 refuses perm_x1=[1, 0, 2]; the plain form (K < 65536) still fuses the
    bmm, with the transposed x1 as its input, as TorchAir's patterns would."""
    fusion = get_fusion("transpose_batchmatmul")
    inputs = _f4(b=2, m=3, k=32768, n=128, x1t=True)
    result = compile_and_run(f4_x1t, inputs)
    report = result.report
    miss = report.misses(fusion.name)
    assert [(m.variant, m.check) for m in miss] == [("transpose(bmm(transpose(x1)))", "k_limit")]
    assert report.match_count(fusion.name) == report.match_count(fusion.name,
                                                                  "transpose(bmm)") == 1
    assert_fused_close(result.outputs, f4_x1t(*inputs), inputs)


def test_unreachable_check_x2_0d():
    """x2 cannot be 0-d when npu_add_rms_norm accepted it; the check still refuses one."""
    from types import SimpleNamespace

    from op_sdk.patterns.add_rms_norm_quant import CHECKS

    check = next(c for c in CHECKS if c.name == "x2_not_0d")
    x1 = torch.fx.Graph().placeholder("x1")
    x1.meta["val"] = torch.empty(4, 32)
    x2 = torch.fx.Graph().placeholder("x2")
    x2.meta["val"] = torch.empty(())
    norm = SimpleNamespace(target=npu.npu_add_rms_norm.default, args=(x1, x2, x1))
    assert check.fn(SimpleNamespace(nodes=[norm])) == "x2 is 0-d"
    x2.meta["val"] = torch.empty(4, 32)
    assert check.fn(SimpleNamespace(nodes=[norm])) is None


# ---- an intermediate that disappears may not have another user ------------------------

def f1_y_used(x1, x2, gamma, smooth):
    y, _, xo = _norm(x1, x2, gamma)
    q, s = npu.npu_dynamic_quant(y, smooth_scales=smooth)
    return q, s, xo, y * 2


def f1_rstd_used(x1, x2, gamma, smooth):
    y, rstd, xo = _norm(x1, x2, gamma)
    q, s = npu.npu_dynamic_quant(y, smooth_scales=smooth)
    return q, s, xo, rstd


def f2_flat_used(x1, x2, gamma):
    y, _, xo = _norm(x1, x2, gamma)
    flat = y.flatten(0, 1)
    q, s = npu.npu_dynamic_quant(flat)
    return q, s.view(-1, 1), xo, flat + 1


def f3_view_used(x1, x2, gamma):
    y, _, xo = _norm(x1, x2, gamma)
    v = y.view(-1, y.size(-1))
    return v.to(torch.float32), y, xo, v * 2


def f4_bmm_used(x1, x2):
    y = torch.bmm(x1, x2)
    return y.transpose(0, 1), y.sum()


def f5_y_used(x1, x2, gamma, scales, zp):
    y, _, xo = _norm(x1, x2, gamma)
    return npu.npu_quantize(y, scales, zp, torch.qint8, axis=-1, div_mode=True), xo, y + 1


OTHER_USERS = [
    ("add_rms_norm_dynamic_quant", f1_y_used, lambda: _f1_inputs()),
    ("add_rms_norm_dynamic_quant", f1_rstd_used, lambda: _f1_inputs()),
    ("add_rms_norm_dynamic_quant_flatten", f2_flat_used, lambda: _f1_inputs()[:3]),
    ("add_rms_norm_cast", f3_view_used, lambda: _f1_inputs()[:3]),
    ("transpose_batchmatmul", f4_bmm_used, lambda: _f4()),
    ("add_rms_norm_quant", f5_y_used, lambda: _f5_inputs()),
]


@pytest.mark.parametrize("name,fn,make_inputs", OTHER_USERS,
                         ids=[f"{n}-{f.__name__}" for n, f, _ in OTHER_USERS])
def test_other_user_blocks(name, fn, make_inputs):
    inputs = make_inputs()
    result = compile_and_run(fn, inputs)
    report = result.report
    assert report.match_count() == 0, report.summary()
    assert get_fusion(name).fused_overload not in result.targets
    misses = report.misses(name, kind="other_user")
    assert misses, report.summary()
    assert "users" in misses[0].reason
    assert_fused_close(result.outputs, fn(*inputs), inputs)


# ---- max-autotune: Inductor's spelling, and which fusions run there --------------------

def test_max_autotune_fires_in_inductor_spelling():
    """Inductor's AOT spells .to() as convert_element_type and view as reshape; the
    canonical patterns match it and Inductor compiles the fused ops as extern kernels."""
    fusion = get_fusion("add_rms_norm_cast")
    variant = fusion.variant("to+view+x_out")
    inputs = _inputs(fusion, variant)
    result = compile_and_run(variant.search_fn, inputs, config("max-autotune"))
    _assert_fired(result, fusion, variant)
    assert result.report.graphs[0].executor == "inductor-cpp"  # CPU inputs: C++ wrapper
    assert_fused_close(result.outputs, variant.search_fn(*inputs), inputs)


def _mixed(x1, x2, gamma, scales, zp, w):
    y, _, xo = _norm(x1, x2, gamma)
    q = npu.npu_quantize(y, scales, zp, torch.qint8, axis=-1, div_mode=True)
    a = torch.bmm(xo.transpose(0, 1).float()[:3], w).transpose(0, 1)
    return q, a


@pytest.mark.parametrize("policy,expected", [
    ("opaque", {"add_rms_norm_quant"}),
    ("all", {"add_rms_norm_quant", "transpose_batchmatmul"}),
    ("torchair", set()),
])
def test_max_autotune_fusion_policy(policy, expected):
    x1, x2, gamma, scales, zp = _f5_inputs(hidden=128)
    w = torch.randn(3, 128, 128) / 12
    inputs = [x1, x2, gamma, scales, zp, w]
    result = compile_and_run(_mixed, inputs, config(
        "max-autotune", experimental_config__max_autotune_fusions=policy))
    fired = {f for (f, _), n in result.report.graphs[0].matches.items() if n}
    assert fired == expected, result.report.summary()
    skipped = set(result.report.graphs[0].fusions_skipped)
    assert skipped.isdisjoint(expected)
    assert_fused_close(result.outputs, _mixed(*inputs), inputs)


def test_reduce_overhead_applies_all_fusions():
    x1, x2, gamma, scales, zp = _f5_inputs(hidden=128)
    w = torch.randn(3, 128, 128) / 12
    result = compile_and_run(_mixed, [x1, x2, gamma, scales, zp, w], config("reduce-overhead"))
    assert result.report.graphs[0].fusions_skipped == {}
    assert result.report.match_count("transpose_batchmatmul") == 1
    assert result.report.match_count("add_rms_norm_quant") == 1


def test_npugraph_ex_is_reduce_overhead():
    fusion = get_fusion("add_rms_norm_quant")
    variant = fusion.variants()[0]
    result = compile_and_run(variant.search_fn, _inputs(fusion, variant), config("npugraph_ex"))
    assert result.report.graphs[0].executor == "eager"
    assert result.report.match_count(fusion.name) == 1


def test_every_layer_fuses_and_getitem_anchor_is_exact():
    """Three layers chained through x_out: three matches, each layer's own."""
    def three(x1, x2, gamma, smooth):
        outs = []
        for _ in range(3):
            y, _, x1 = _norm(x1, x2, gamma)
            outs += list(npu.npu_dynamic_quant(y, smooth_scales=smooth))
        return outs + [x1]
    inputs = _f1_inputs()
    result = compile_and_run(three, inputs)
    assert result.report.match_count("add_rms_norm_dynamic_quant") == 3
    assert result.targets.count(npu.npu_add_rms_norm_dynamic_quant.default) == 3
    assert npu.npu_add_rms_norm.default not in result.targets
    assert_fused_close(result.outputs, three(*inputs), inputs)
    assert operator.getitem in result.targets


def test_a_fusion_is_applied_before_the_fusions_it_contains():
    """Fusion 9's chain holds fusion 6's npu_swiglu -> npu_dynamic_quant: a compile applies 9
    first (``Fusion.before``), the others in number order; a ``before`` naming no fusion is
    refused."""
    import dataclasses

    from op_sdk.patterns import APPLY_ORDER, _apply_order

    names = [f.name for f in APPLY_ORDER]
    assert names.index("dequant_swiglu_quant") < names.index("swiglu_quant")
    assert sorted(APPLY_ORDER, key=lambda f: f.number) == list(DEFAULT_FUSIONS)
    rest = [f for f in APPLY_ORDER if f.name != "dequant_swiglu_quant"]
    assert [f.number for f in rest] == sorted(f.number for f in rest)
    bad = dataclasses.replace(get_fusion("swiglu_quant"), before=("no_such_fusion",))
    with pytest.raises(RuntimeError, match="no_such_fusion.*not fusions"):
        _apply_order((bad,))
