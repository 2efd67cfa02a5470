"""The native_ops stage (op_sdk/patterns/native.py): torch-native spellings become torch_npu
operators before the fusions; on small functions, on W8A8 blocks, and on real model code
(transformers' Llama, Qwen2 and DeepSeek-V3, tiny configs, random weights)."""

from __future__ import annotations

import collections

import pytest
import torch
import torch.nn.functional as F

import op_sdk
from op_sdk.patterns import native
from tests.fusion_harness import assert_fused_close, compile_and_run, config

npu, aten = torch.ops.npu, torch.ops.aten
MODES = ("reduce-overhead", "max-autotune")


def hf_norm(x, w, eps=1e-5):
    """LlamaRMSNorm.forward, as transformers writes it."""
    x32 = x.to(torch.float32)
    var = x32.pow(2).mean(-1, keepdim=True)
    x32 = x32 * torch.rsqrt(var + eps)
    return w * x32.to(x.dtype)


def hf_norm_rhs(x, w, eps=1e-5):
    x32 = x.to(torch.float32)
    return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * w


# max-autotune on the CPU: Inductor fuses the torch-native norm itself, so the benefit
# model keeps it there (see the next test); planned for the NPU, the rule applies
NPU_PLAN = {"experimental_config__fusion_benefit_device": "npu"}


@pytest.mark.parametrize("mode,dtype", [("reduce-overhead", torch.bfloat16),
                                        ("reduce-overhead", torch.float16),
                                        ("reduce-overhead", torch.float32),
                                        ("max-autotune", torch.bfloat16)])
@pytest.mark.parametrize("fn", [hf_norm, hf_norm_rhs])
def test_hf_rms_norm_becomes_npu_rms_norm(mode, dtype, fn):
    x = torch.randn(2, 7, 33, dtype=dtype)
    w = torch.rand(33, dtype=dtype) + 0.5
    res = compile_and_run(fn, [x, w], config(mode, **(NPU_PLAN if mode == "max-autotune"
                                                        else {})))
    assert res.report.match_count("native_rms_norm") == 1
    assert res.has(npu.npu_rms_norm.default)
    assert not res.has(aten.rsqrt.default) and not res.has(aten.pow.Tensor_Scalar)
    assert_fused_close(res.outputs, fn(x, w), [x, w])


def test_inductor_keeps_the_native_norm_on_the_cpu():
    """In max-autotune the unfused side is the one kernel Inductor generates: npu_rms_norm
    saves nothing there, so the benefit model refuses it (a near miss of kind "benefit");
    a residual add + npu_rms_norm (an npu operator Inductor cannot fuse) still fuses."""
    x = torch.randn(4, 16, 64, dtype=torch.bfloat16)
    w = torch.rand(64, dtype=torch.bfloat16) + 0.5
    res = compile_and_run(hf_norm, [x, w], config("max-autotune"))
    assert res.report.match_count("native_rms_norm") == 0
    assert res.has(aten.rsqrt.default) and not res.has(npu.npu_rms_norm.default)
    refused = res.report.misses("native_rms_norm", "benefit")
    assert refused and "threshold" in refused[0].reason
    assert_fused_close(res.outputs, hf_norm(x, w), [x, w])

    def add_norm(h, r, w):
        s = h + r
        return npu.npu_rms_norm(s, w)[0], s

    res = compile_and_run(add_norm, [x, x.flip(0), w], config("max-autotune"))
    assert res.report.match_count("native_add_rms_norm") == 1, res.report.summary()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_functional_and_module_rms_norm(dtype, eps):
    norm = torch.nn.RMSNorm(48, eps=eps, dtype=dtype)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 48, dtype=dtype)
    for fn in (norm, lambda t: F.rms_norm(t, (48,), norm.weight, eps)):
        res = compile_and_run(fn, [x])
        assert res.report.match_count("native_rms_norm") == 1, res.report.summary()
        assert res.has(npu.npu_rms_norm.default) and not res.has(aten.rsqrt.default)
        with torch.no_grad():
            assert_fused_close(res.outputs, fn(x), [x])


def test_non_contiguous_and_dynamic_shapes():
    w = torch.rand(64, dtype=torch.bfloat16) + 0.5
    base = torch.randn(9, 4, 64, dtype=torch.bfloat16)
    x = base.transpose(0, 1)  # (4, 9, 64), not contiguous

    def norm(x, w):  # epsilon a literal: a float argument is a graph input under dynamic=True
        x32 = x.to(torch.float32)
        return w * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)

    res = compile_and_run(norm, [x, w], dynamic=True)
    assert res.report.match_count("native_rms_norm") == 1
    assert_fused_close(res.outputs, hf_norm(x, w), [x, w])
    compiled = torch.compile(norm, backend=res.backend, dynamic=True)
    y = torch.randn(3, 11, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        assert_fused_close(compiled(y, w), hf_norm(y, w), [y, w])


def test_norm_spellings_refused_with_reason():
    x = torch.randn(4, 6, 32, dtype=torch.bfloat16)
    w = torch.rand(32, dtype=torch.bfloat16)

    def cube(x, w):
        x32 = x.float()
        return w * (x32 * torch.rsqrt(x32.pow(3).mean(-1, keepdim=True) + 1e-5)).to(x.dtype)

    def over_rows(x, w):
        x32 = x.float()
        return w * (x32 * torch.rsqrt(x32.pow(2).mean(1, keepdim=True) + 1e-5)).to(x.dtype)

    for fn, words in ((cube, "power 3"), (over_rows, "reduces dims [1]")):
        res = compile_and_run(fn, [x, w])
        assert res.report.match_count("native_rms_norm") == 0
        assert not res.has(npu.npu_rms_norm.default)
        assert any(words in m.reason for m in res.report.misses("native_rms_norm")), \
            res.report.summary()
    # an fp32 weight times the bf16 HF norm promotes the result to fp32: refused
    w32 = torch.rand(32)
    res = compile_and_run(hf_norm, [x, w32])
    assert res.report.match_count("native_rms_norm") == 0
    assert any("promotes" in m.reason for m in res.report.misses("native_rms_norm"))
    assert res.outputs.dtype == torch.float32


@pytest.mark.parametrize("mode", MODES)
def test_residual_add_and_norm_become_npu_add_rms_norm(mode):
    def block(h, r, w):
        s = h + r
        return hf_norm(s, w), s * 2

    h, r = torch.randn(2, 5, 64, dtype=torch.bfloat16), torch.randn(2, 5, 64, dtype=torch.bfloat16)
    w = torch.rand(64, dtype=torch.bfloat16) + 0.5
    res = compile_and_run(block, [h, r, w], config(mode, **(NPU_PLAN if mode == "max-autotune"
                                                            else {})))
    assert res.report.match_count("native_add_rms_norm") == 1
    assert res.has(npu.npu_add_rms_norm.default) and not res.has(npu.npu_rms_norm.default)
    assert_fused_close(res.outputs, block(h, r, w), [h, r, w])


def test_broadcasting_residual_add_is_refused():
    def block(h, r, w):
        return hf_norm(h + r, w)

    h, r = torch.randn(2, 5, 64, dtype=torch.bfloat16), torch.randn(64, dtype=torch.bfloat16)
    w = torch.rand(64, dtype=torch.bfloat16)
    res = compile_and_run(block, [h, r, w])
    assert res.report.match_count("native_rms_norm") == 1
    assert res.report.match_count("native_add_rms_norm") == 0
    assert any("broadcasts" in m.reason for m in res.report.misses("native_add_rms_norm"))


def plain_quant(x):
    amax = x.float().abs().amax(-1, keepdim=True)
    scale = amax / 127.0
    q = torch.round(x.float() / scale).clamp(-128, 127).to(torch.int8)
    return q, scale.squeeze(-1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_plain_dynamic_quant_becomes_npu_dynamic_quant(dtype):
    x = torch.randn(3, 7, 40, dtype=dtype)
    res = compile_and_run(plain_quant, [x])
    assert res.report.match_count("native_dynamic_quant") == 1, res.report.summary()
    assert res.has(npu.npu_dynamic_quant.default) and not res.has(aten.round.default)
    assert_fused_close(res.outputs, plain_quant(x), [x])


def test_quant_spellings_refused_with_reason():
    def by_100(x):
        scale = x.float().abs().amax(-1, keepdim=True) / 100.0
        return torch.round(x.float() / scale).clamp(-128, 127).to(torch.int8), scale

    def narrow(x):
        scale = x.float().abs().amax(-1, keepdim=True) / 127.0
        return torch.round(x.float() / scale).clamp(-100, 100).to(torch.int8), scale

    x = torch.randn(3, 40, dtype=torch.bfloat16)
    for fn, words in ((by_100, "127"), (narrow, "clamped to [-100, 100]")):
        res = compile_and_run(fn, [x])
        assert res.report.match_count("native_dynamic_quant") == 0
        assert any(words in m.reason for m in res.report.misses("native_dynamic_quant")), \
            res.report.summary()


# ---- RoPE (rotate_half) and SwiGLU ----------------------------------------------------------

def rotate_half(x):
    """transformers' rotate_half."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def hf_rope(q, k, cos, sin):
    """transformers' apply_rotary_pos_emb (unsqueeze_dim=1)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def _rope_inputs(dtype, seq=7, head_dim=32):
    torch.manual_seed(0)
    angles = torch.randn(2, seq, head_dim)
    return [torch.randn(2, 4, seq, head_dim, dtype=dtype),
            torch.randn(2, 2, seq, head_dim, dtype=dtype),
            angles.cos().to(dtype), angles.sin().to(dtype)]


@pytest.mark.parametrize("mode,dtype", [("reduce-overhead", torch.bfloat16),
                                        ("reduce-overhead", torch.float16),
                                        ("reduce-overhead", torch.float32),
                                        ("max-autotune", torch.bfloat16)])
def test_hf_rope_becomes_npu_rotary_mul(mode, dtype):
    args = _rope_inputs(dtype)
    res = compile_and_run(hf_rope, args, config(mode, **(NPU_PLAN if mode == "max-autotune"
                                                          else {})))
    assert res.report.match_count("native_rotary_mul") == 2, res.report.summary()  # q and k
    assert res.targets.count(npu.npu_rotary_mul.default) == 2
    assert not res.has(aten.cat.default) and not res.has(aten.neg.default)
    assert_fused_close(res.outputs, hf_rope(*args), args)


def ds_rope(q, k, cos, sin, pairs=2):
    """transformers' DeepSeek-V3 apply_rotary_pos_emb_interleave (``pairs`` 2); another
    ``pairs`` views the last dim in groups of that many instead (not a de-interleave)."""
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    b, h, s, d = q.shape
    q = q.view(b, h, s, d // pairs, pairs).transpose(4, 3).reshape(b, h, s, d)
    b, h, s, d = k.shape
    k = k.view(b, h, s, d // pairs, pairs).transpose(4, 3).reshape(b, h, s, d)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_deepseek_interleaved_rope_becomes_interleave_half(mode):
    args = _rope_inputs(torch.bfloat16)
    cfg = config(mode, **(NPU_PLAN if mode == "max-autotune" else {}))
    modes = []  # the rotary_mode of each npu_rotary_mul the passes leave
    cfg.post_grad_custom_post_pass = lambda gm, *_: modes.extend(
        n.args[3:] for n in gm.graph.nodes if n.target == npu.npu_rotary_mul.default)
    res = compile_and_run(ds_rope, args, cfg)
    assert res.report.match_count("native_rotary_mul", "interleave") == 2, res.report.summary()
    assert res.targets.count(npu.npu_rotary_mul.default) == 2
    assert modes == [("interleave-half",)] * 2
    # the de-interleaving copies are gone: the operator reads q and k as they are
    assert not res.has(aten.permute.default) and not res.has(aten.clone.default)
    assert not res.has(aten.cat.default)
    assert_fused_close(res.outputs, ds_rope(*args), args)
    # bit for bit the plain rule's result on the de-interleaved copy (one operator, two
    # spellings of the same arithmetic)
    q, _, cos, sin = args
    b, h, s, d = q.shape
    copy = q.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
    c, sn = cos.unsqueeze(1), sin.unsqueeze(1)
    assert torch.equal(npu.npu_rotary_mul(q, c, sn, "interleave-half"), npu.npu_rotary_mul(copy, c, sn))


def _pairs_rope(q, k, cos, sin, lanes=(0, 1)):
    """transformers 5's DeepSeek-V3 apply_rotary_pos_emb_interleave (its even / odd lanes;
    ``lanes`` (1, 0) swaps them: another rotation)."""
    cos = cos[..., : cos.shape[-1] // 2].unsqueeze(1)
    sin = sin[..., : sin.shape[-1] // 2].unsqueeze(1)
    a, b = lanes
    q1, q2 = q[..., a::2], q[..., b::2]
    k1, k2 = k[..., a::2], k[..., b::2]
    return (torch.cat([q1 * cos - q2 * sin, q2 * cos + q1 * sin], dim=-1),
            torch.cat([k1 * cos - k2 * sin, k2 * cos + k1 * sin], dim=-1))


@pytest.mark.parametrize("mode", ["reduce-overhead", "max-autotune"])
def test_transformers_pairs_rope_becomes_interleave_half(mode):
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    fn = modeling_deepseek_v3.apply_rotary_pos_emb_interleave
    args = _rope_inputs(torch.bfloat16)
    cfg = config(mode, **(NPU_PLAN if mode == "max-autotune" else {}))
    modes = []
    cfg.post_grad_custom_post_pass = lambda gm, *_: modes.extend(
        n.args[3:] for n in gm.graph.nodes if n.target == npu.npu_rotary_mul.default)
    res = compile_and_run(fn, args, cfg)
    assert res.report.match_count("native_rotary_mul", "pairs") == 2, res.report.summary()
    assert modes == [("interleave-half",)] * 2
    assert not res.has(aten.sub.Tensor)
    assert_fused_close(res.outputs, fn(*args), args)
    assert_fused_close(res.outputs, _pairs_rope(*args), args)  # the spelling below is its


def test_pairs_rope_with_swapped_lanes_is_refused_with_reason():
    args = _rope_inputs(torch.bfloat16)
    res = compile_and_run(lambda *a: _pairs_rope(*a, lanes=(1, 0)), args)
    assert res.report.match_count("native_rotary_mul") == 0
    assert any("even / odd lanes" in m.reason for m in res.report.misses("native_rotary_mul")), \
        res.report.summary()
    assert_fused_close(res.outputs, _pairs_rope(*args, lanes=(1, 0)), args)


def test_rope_after_a_view_that_is_no_deinterleave_stays_half():
    args = _rope_inputs(torch.bfloat16, head_dim=32)
    res = compile_and_run(lambda q, k, c, s: ds_rope(q, k, c, s, pairs=4), args)
    assert res.report.match_count("native_rotary_mul", "interleave") == 0
    assert res.report.match_count("native_rotary_mul", "hf") == 2, res.report.summary()
    assert any("pairs" in m.reason for m in res.report.misses("native_rotary_mul")), \
        res.report.summary()
    assert_fused_close(res.outputs, ds_rope(*args, pairs=4), args)


def test_rope_sum_in_either_order_and_dynamic_shapes():
    def rope_sin_first(x, cos, sin):
        return rotate_half(x) * sin + x * cos

    x, _, cos, sin = _rope_inputs(torch.bfloat16)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    for t in (x, cos, sin):  # batch and sequence dynamic; the head dim static, as in a model
        torch._dynamo.mark_dynamic(t, 0)
        torch._dynamo.mark_dynamic(t, 2)
    res = compile_and_run(rope_sin_first, [x, cos, sin])
    assert res.report.match_count("native_rotary_mul") == 1, res.report.summary()
    assert_fused_close(res.outputs, rope_sin_first(x, cos, sin), [x, cos, sin])
    compiled = torch.compile(rope_sin_first, backend=res.backend)
    y, _, c2, s2 = _rope_inputs(torch.bfloat16, seq=11)
    with torch.no_grad():
        assert_fused_close(compiled(y[:1], c2[:1].unsqueeze(1), s2[:1].unsqueeze(1)),
                           rope_sin_first(y[:1], c2[:1].unsqueeze(1), s2[:1].unsqueeze(1)), [y])
    # every dim dynamic: an odd head dim would be legal for the plain code and not for
    # npu_rotary_mul, and a check adds no guard: refused, saying why
    res = compile_and_run(rope_sin_first, [x, cos, sin], dynamic=True)
    assert res.report.match_count("native_rotary_mul") == 0
    assert any("not known to be even" in m.reason for m in res.report.misses("native_rotary_mul"))
    assert_fused_close(res.outputs, rope_sin_first(x, cos, sin), [x, cos, sin])


def test_rope_spellings_refused_with_reason():
    x, _, cos, sin = _rope_inputs(torch.bfloat16)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)

    def wrong_halves(x, cos, sin):  # cat((-x1, x2)): not a rotation
        h = x.shape[-1] // 2
        return x * cos + torch.cat((-x[..., :h], x[..., h:]), -1) * sin

    res = compile_and_run(wrong_halves, [x, cos, sin])
    assert res.report.match_count("native_rotary_mul") == 0
    assert any("slices take [0, 16) and [16, 9223372036854775807)" in m.reason or
               "splits it into halves" in m.reason
               for m in res.report.misses("native_rotary_mul")), res.report.summary()
    # float32 cos / sin with a bf16 x promote the result to float32: refused
    res = compile_and_run(hf_rope, [x, x.clone(), cos.squeeze(1).float(), sin.squeeze(1).float()])
    assert res.report.match_count("native_rotary_mul") == 0
    assert any("returns x's dtype" in m.reason for m in res.report.misses("native_rotary_mul"))
    assert res.outputs[0].dtype == torch.float32


def silu_mul_chunk(x):
    gate, up = x.chunk(2, dim=-1)
    return F.silu(gate) * up


def silu_mul_slices(x):
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def up_times_silu(x):  # Phi-3's order: up_states * act(gate)
    gate, up = x.chunk(2, dim=-1)
    return up * F.silu(gate)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("fn", [silu_mul_chunk, silu_mul_slices, up_times_silu])
def test_silu_times_up_becomes_npu_swiglu(fn, dtype):
    x = torch.randn(3, 5, 2 * 48, dtype=dtype)
    res = compile_and_run(fn, [x])
    assert res.report.match_count("native_swiglu") == 1, res.report.summary()
    assert res.has(npu.npu_swiglu.default) and not res.has(aten.silu.default)
    assert_fused_close(res.outputs, fn(x), [x])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("fn", [silu_mul_chunk, up_times_silu])
def test_silu_times_up_under_inductor_decompositions(fn, dtype):
    """max-autotune: Inductor's decompositions leave silu as g / (1 + exp(-g)) (in float32
    between two casts for bf16); the decomposed spellings match it. Planned for the NPU the
    rule applies; on the CPU the benefit model leaves it to Inductor's one kernel."""
    x = torch.randn(3, 5, 2 * 48, dtype=dtype)
    res = compile_and_run(fn, [x], config("max-autotune", **NPU_PLAN))
    variant = ("chunk" if fn is silu_mul_chunk else "chunk+up_first") + \
        ("+decomposed_fp32" if dtype == torch.float32 else "+decomposed")
    assert res.report.match_count("native_swiglu", variant) == 1, res.report.summary()
    assert res.has(npu.npu_swiglu.default) and not res.has(aten.exp.default)
    assert_fused_close(res.outputs, fn(x), [x])
    res = compile_and_run(fn, [x], config("max-autotune"))
    assert res.report.match_count("native_swiglu") == 0
    assert res.report.misses("native_swiglu", "benefit"), res.report.summary()


def test_decomposed_swiglu_spelling_that_is_not_silu_is_refused():
    def not_silu(x):  # g / (2 + exp(-g)) * u: the decomposed shape, another function
        g, u = x.chunk(2, dim=-1)
        return g / (2 + torch.exp(-g)) * u

    x = torch.randn(3, 96)
    res = compile_and_run(not_silu, [x], config("max-autotune", **NPU_PLAN))
    assert res.report.match_count("native_swiglu") == 0
    assert any("adds [2]" in m.reason for m in res.report.misses("native_swiglu")), \
        res.report.summary()
    assert_fused_close(res.outputs, not_silu(x), [x])


def gpt_oss_gate(x, limit=7.0, alpha=1.702):
    """transformers' GptOssExperts._apply_gate, as it writes it."""
    gate, up = x[..., ::2], x[..., 1::2]
    gate = gate.clamp(min=None, max=limit)
    up = up.clamp(min=-limit, max=limit)
    glu = gate * torch.sigmoid(gate * alpha)
    return (up + 1) * glu


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_gpt_oss_clipped_swiglu_becomes_npu_clipped_swiglu(dtype):
    x = torch.randn(3, 5, 2 * 48, dtype=dtype) * 6
    res = compile_and_run(gpt_oss_gate, [x])
    assert res.report.match_count("native_clipped_swiglu") == 1, res.report.summary()
    assert res.has(npu.npu_clipped_swiglu.default) and not res.has(aten.sigmoid.default)
    assert_fused_close(res.outputs, gpt_oss_gate(x), [x])
    # the graph's scalars reach the operator
    other = lambda t: gpt_oss_gate(t, limit=3.0, alpha=0.5)  # noqa: E731
    res = compile_and_run(other, [x])
    assert res.report.match_count("native_clipped_swiglu") == 1, res.report.summary()
    assert_fused_close(res.outputs, other(x), [x])


def test_gpt_oss_model_gate_fuses_under_max_autotune_planned_for_the_npu():
    """The module's own _apply_gate (transformers' GptOssExperts, tiny config), in
    max-autotune's decomposed spelling, planned for the NPU."""
    from transformers import GptOssConfig
    from transformers.models.gpt_oss.modeling_gpt_oss import GptOssExperts

    cfg = GptOssConfig(hidden_size=32, intermediate_size=48, num_local_experts=2)
    experts = GptOssExperts(cfg)
    x = torch.randn(4, 96, dtype=torch.bfloat16) * 6
    res = compile_and_run(experts._apply_gate, [x], config("max-autotune", **NPU_PLAN))
    assert res.report.match_count("native_clipped_swiglu", "lanes+decomposed") == 1, res.report.summary()
    assert res.has(npu.npu_clipped_swiglu.default)
    assert_fused_close(res.outputs, experts._apply_gate(x), [x])


def test_clipped_swiglu_spellings_refused_with_reason():
    def odd_first(x):  # gate from the odd lanes
        gate, up = x[..., 1::2], x[..., ::2]
        gate = gate.clamp(max=7.0)
        return (up.clamp(-7.0, 7.0) + 1) * (gate * torch.sigmoid(gate * 1.702))

    def lopsided(x):  # up clamped to [-5, 7]
        gate, up = x[..., ::2], x[..., 1::2]
        gate = gate.clamp(max=7.0)
        return (up.clamp(-5.0, 7.0) + 1) * (gate * torch.sigmoid(gate * 1.702))

    x = torch.randn(3, 96, dtype=torch.bfloat16) * 6
    for fn, words in ((odd_first, "even / odd lanes"), (lopsided, "[-5.0, 7.0]")):
        res = compile_and_run(fn, [x])
        assert res.report.match_count("native_clipped_swiglu") == 0
        assert not res.has(npu.npu_clipped_swiglu.default)
        assert any(words in m.reason for m in res.report.misses("native_clipped_swiglu")), \
            res.report.summary()
        assert_fused_close(res.outputs, fn(x), [x])


def test_swiglu_spellings_refused_with_reason():
    def silu_of_second(x):
        up, gate = x.chunk(2, dim=-1)
        return F.silu(gate) * up

    def uneven(x):
        return F.silu(x[..., :40]) * x[..., 40:80]

    x = torch.randn(3, 96, dtype=torch.bfloat16)
    for fn, words in ((silu_of_second, None), (uneven, "into halves")):
        res = compile_and_run(fn, [x])
        assert res.report.match_count("native_swiglu") == 0
        assert not res.has(npu.npu_swiglu.default)
        if words:  # (silu of the second half is no pattern's shape: no near miss)
            assert any(words in m.reason for m in res.report.misses("native_swiglu")), \
                res.report.summary()
        assert_fused_close(res.outputs, fn(x), [x])


def test_switches():
    x = torch.randn(2, 7, 32, dtype=torch.bfloat16)
    w = torch.rand(32, dtype=torch.bfloat16)
    res = compile_and_run(hf_norm, [x, w], config(experimental_config__native_ops=False))
    assert res.report.match_count() == 0 and res.has(aten.rsqrt.default)
    assert res.report.graphs[0].stage("native_ops").skipped == \
        "experimental_config.native_ops=False"
    res = compile_and_run(hf_norm, [x, w], config(experimental_config__pattern_fusion_pass=False))
    assert res.report.graphs[0].stage("native_ops").skipped == \
        "experimental_config.pattern_fusion_pass=False"
    res = compile_and_run(hf_norm, [x, w], config(
        "max-autotune", experimental_config__max_autotune_fusions="opaque"))
    assert "max_autotune_fusions='opaque'" in res.report.graphs[0].stage("native_ops").skipped
    assert res.report.match_count() == 0


def test_w8a8_block_fuses_norm_and_quantisation():
    """Residual add + HF norm feeding two W8A8 projections of one input: the norm becomes
    npu_add_rms_norm, the two quantisations of its output merge, and fusion 1 fuses them
    into npu_add_rms_norm_dynamic_quant."""
    torch.manual_seed(0)
    lin = torch.nn.ModuleDict({"a": torch.nn.Linear(64, 96), "b": torch.nn.Linear(64, 32,
                                                                                    bias=False)})
    op_sdk.quantize_w8a8(lin)
    assert lin.w8a8_layers == 2 and isinstance(lin["a"], op_sdk.W8A8Linear)
    w = (torch.rand(64) + 0.5).to(torch.bfloat16)
    lin["a"].bias = lin["a"].bias.to(torch.bfloat16)

    def block(h, r):
        s = h + r
        y = hf_norm(s, w)
        return lin["a"](y), lin["b"](y), s

    h, r = torch.randn(2, 5, 64, dtype=torch.bfloat16), torch.randn(2, 5, 64, dtype=torch.bfloat16)
    res = compile_and_run(block, [h, r])
    rep = res.report
    assert rep.match_count("native_add_rms_norm") == 1
    assert rep.match_count("common_calls") == 1
    assert rep.match_count("add_rms_norm_dynamic_quant") == 1, rep.summary()
    assert res.has(npu.npu_add_rms_norm_dynamic_quant.default)
    assert not res.has(npu.npu_dynamic_quant.default)
    with torch.no_grad():
        ref = block(h, r)
    for got, exp in zip(res.outputs, ref):
        tol = 0.05 * float(exp.float().abs().max())  # one int8 step of the activation
        assert torch.allclose(got.float(), exp.float(), atol=tol, rtol=0)


class GateUpMLP(torch.nn.Module):
    """An MLP with gate and up in one projection (Phi-3, vLLM's MergedColumnParallelLinear):
    down(silu(gate) * up) of gate_up(x).chunk(2, -1)."""

    def __init__(self, hidden=64, inter=96):
        super().__init__()
        self.gate_up = torch.nn.Linear(hidden, 2 * inter, bias=False)
        self.down = torch.nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_w8a8_mlp_fuses_swiglu_and_quantisation(dtype):
    """silu(gate) * up becomes npu_swiglu (native_swiglu), and with the down projection's
    int8 quantisation npu_swiglu_quant (fusion 6): one kernel from the gate_up GEMM's output
    to the down GEMM's int8 input."""
    torch.manual_seed(0)
    mlp = op_sdk.quantize_w8a8(GateUpMLP().to(dtype))
    assert mlp.w8a8_layers == 2
    x = torch.randn(2, 5, 64, dtype=dtype)
    res = compile_and_run(mlp, [x])
    rep = res.report
    assert rep.match_count("native_swiglu") == 1, rep.summary()
    assert rep.match_count("swiglu_quant") == 1, rep.summary()
    assert res.has(npu.npu_swiglu_quant.default)
    assert not res.has(npu.npu_swiglu.default) and not res.has(aten.silu.default)
    # the gate_up projection's own input quantisation stays
    assert res.targets.count(npu.npu_dynamic_quant.default) == 1
    with torch.no_grad():
        ref = mlp(x)
    tol = 0.05 * float(ref.float().abs().max())  # one int8 step of the activation
    assert torch.allclose(res.outputs.float(), ref.float(), atol=tol, rtol=0)


def test_swiglu_quant_refuses_smoothed_quantisation():
    """npu_dynamic_quant with 1-D smooth_scales: npu_swiglu_quant takes (1, N) scales, the
    fusion has no smooth input: a near miss saying so."""
    def block(x, smooth):
        return npu.npu_dynamic_quant(npu.npu_swiglu(x, -1), smooth_scales=smooth)

    x, smooth = torch.randn(4, 64, dtype=torch.bfloat16), torch.rand(32, dtype=torch.bfloat16)
    res = compile_and_run(block, [x, smooth])
    assert res.report.match_count("swiglu_quant") == 0
    assert any("smooth_scales" in m.reason for m in res.report.misses("swiglu_quant")), \
        res.report.summary()
    assert res.has(npu.npu_swiglu.default) and not res.has(npu.npu_swiglu_quant.default)


def test_verification_at_registration_drops_a_wrong_variant():
    wrong = native.Fusion(
        name="native_test_wrong_eps", number=199, fused_op="npu_rms_norm",
        unfused_ops=("aten.pow",),
        variants=lambda: (native.Variant(
            "wrong", lambda x, weight: native._rms_norm_variant("fp32").search_fn(
                x, weight, 1e-6),
            lambda x, weight: npu.npu_rms_norm(x, weight, 0.5)[0]),
            native.Variant("right", lambda x, weight: native._rms_norm_variant("fp32").search_fn(
                x, weight, 1e-6), lambda x, weight: npu.npu_rms_norm(x, weight, 1e-6)[0])),
        example_inputs=lambda dtype=None, variant=None: {
            "x": torch.randn(4, 16), "weight": torch.rand(16) + 0.5},
        checks=(), dtypes=(torch.float32,), torchair_max_autotune=False,
        opaque_to_inductor=False)
    native._verify(wrong)
    names = [v.name for v in wrong.variants()]
    assert "wrong" not in names and "right" in names
    assert "native_test_wrong_eps/wrong" in native.registration_failures()
    # the shipped rules all verified
    native.native_registries()
    assert not {k: v for k, v in native.registration_failures().items()
                if not k.startswith("native_test_")}


# ---- real model code ----------------------------------------------------------------------

transformers = pytest.importorskip("transformers", reason="transformers is a test dependency "
                                   "(the README's test command installs it)")


def _tiny(kind: str):
    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    if kind == "llama":
        return transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    if kind == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    if kind == "qwen3":  # q_norm / k_norm: RMSNorms over each head's 16 dims
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**common, head_dim=16))
    cfg = transformers.DeepseekV3Config(
        **{**common, "num_key_value_heads": 4}, moe_intermediate_size=32,
        first_k_dense_replace=1, n_routed_experts=4, num_experts_per_tok=2,
        n_shared_experts=1, n_group=1, topk_group=1, q_lora_rank=32, kv_lora_rank=16,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8)
    return transformers.DeepseekV3ForCausalLM(cfg)


NORMS_WITH_ADD = ("npu_add_rms_norm", "npu_add_rms_norm_cast", "npu_add_rms_norm_dynamic_quant",
                  "npu_add_rms_norm_quant")


def compile_model(model, ids, cfg):
    counts: collections.Counter = collections.Counter()

    def capture(gm, example_inputs, c):
        counts.update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")

    cfg.post_grad_custom_post_pass = capture
    torch._dynamo.reset()
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    with torch.no_grad():
        out = torch.compile(model, backend=backend)(ids).logits
    return out, counts, backend


@pytest.mark.parametrize("kind,mode", [("llama", "reduce-overhead"), ("llama", "max-autotune"),
                                       ("qwen2", "reduce-overhead"),
                                       ("deepseek_v3", "reduce-overhead")])
def test_transformers_models_get_npu_norms(kind, mode):
    torch.manual_seed(0)
    model = _tiny(kind).eval().to(torch.bfloat16)
    norms = sum(type(m).__name__.endswith("RMSNorm") for m in model.modules())
    ids = torch.randint(0, 128, (2, 9))
    with torch.no_grad():
        ref = model(ids).logits
    # (max-autotune planned for the NPU: on the CPU Inductor keeps the norms, see above)
    out, counts, backend = compile_model(model, ids, config(
        mode, **(NPU_PLAN if mode == "max-autotune" else {})))
    # every norm an npu norm operator (DeepSeek-V3's router reads the post-attention norm
    # in fp32: that one fuses further into npu_add_rms_norm_cast, default fusion 3)
    with_add = sum(counts[f"npu.{op}.default"] for op in NORMS_WITH_ADD)
    assert counts["npu.npu_rms_norm.default"] + with_add == norms, \
        (dict(counts), op_sdk.explain(backend).summary())
    assert with_add == 2 * 2  # the two residual adds of each of the 2 layers
    assert counts["aten.rsqrt.default"] == 0
    # RoPE on q and k of each layer: rotate_half, or DeepSeek-V3's interleaved spelling
    # (cat([q1 cos - q2 sin, q2 cos + q1 sin]) of the even / odd lanes: the "pairs" form,
    # rotary_mode "interleave-half"); no slice of the lanes left
    assert counts["npu.npu_rotary_mul.default"] == 2 * 2
    if kind == "deepseek_v3":
        assert sum(r.match_count("native_rotary_mul", "pairs") for r in backend.reports) == 4
    err = (out.float() - ref.float()).abs().max().item()
    assert err <= 0.02 * ref.float().abs().max().item() + 0.02, err


@pytest.mark.parametrize("mode", MODES)
def test_transformers_qwen3_gets_qk_norms_and_rope(mode):
    """Qwen3's attention: q_norm / k_norm (RMSNorm over each head) become npu_rms_norm, its RoPE
    npu_rotary_mul, and each norm + RoPE pair (the heads transposed between them) then one
    op_sdk::rms_norm_rope (fusion 8), planned for the NPU in max-autotune; logits close to
    eager."""
    torch.manual_seed(0)
    model = _tiny("qwen3").eval().to(torch.bfloat16)
    ids = torch.randint(0, 128, (2, 9))
    with torch.no_grad():
        ref = model(ids).logits
    out, counts, backend = compile_model(model, ids, config(
        mode, **(NPU_PLAN if mode == "max-autotune" else {})))
    exp = op_sdk.explain(backend)
    summary = exp.summary()
    # per layer q and k: norm + RoPE fused; the final norm stays npu_rms_norm; the input /
    # post-attention norms with their residual adds
    assert exp.patterns.get("rms_norm_rope") == 2 * 2, summary
    assert counts["op_sdk.rms_norm_rope.default"] == 2 * 2, (dict(counts), summary)
    assert counts["npu.npu_rms_norm.default"] == 1, summary
    assert counts["npu.npu_rotary_mul.default"] == 0, summary
    assert counts["npu.npu_add_rms_norm.default"] == 2 * 2, summary
    assert counts["aten.rsqrt.default"] == 0
    err = (out.float() - ref.float()).abs().max().item()
    assert err <= 0.02 * ref.float().abs().max().item() + 0.02, err


class W8A8Expert(torch.nn.Module):
    """A W8A8 MLP / MoE expert as vllm-ascend's W8A8 MoE computes it: the gate / up GEMM
    returns its int32 accumulator (npu_quant_matmul, output_dtype int32), dequantised by the
    weight's and the tokens' scales, SwiGLU (npu_swiglu, or F.silu(gate) * up of the chunks),
    per-token int8 for the down GEMM."""

    def __init__(self, hidden=64, inter=96, native=False):
        super().__init__()
        self.native = native
        self.register_buffer("w13", torch.randint(-127, 128, (2 * inter, hidden), dtype=torch.int8))
        self.register_buffer("w13_scale", torch.rand(2 * inter) * 1e-3)
        self.register_buffer("w2", torch.randint(-127, 128, (hidden, inter), dtype=torch.int8))
        self.register_buffer("w2_scale", torch.rand(hidden) * 1e-2)

    def forward(self, x):
        npu = torch.ops.npu
        q, s = npu.npu_dynamic_quant(x)
        acc = npu.npu_quant_matmul(q, self.w13.t(), self.w13_scale, output_dtype=torch.int32)
        t = acc.float() * self.w13_scale * s.unsqueeze(-1)
        if self.native:
            gate, up = t.chunk(2, dim=-1)
            h = F.silu(gate) * up
        else:
            h = npu.npu_swiglu(t, -1)
        hq, hs = npu.npu_dynamic_quant(h)
        return npu.npu_quant_matmul(hq, self.w2.t(), self.w2_scale, pertoken_scale=hs,
                                    output_dtype=torch.bfloat16)


@pytest.mark.parametrize("native_spelling", [False, True], ids=["npu_swiglu", "silu_chunk"])
@pytest.mark.parametrize("mode", MODES)
def test_w8a8_expert_gets_dequant_swiglu_quant(mode, native_spelling):
    """The int32 accumulator's dequantisation + SwiGLU + dynamic quant become one
    npu_dequant_swiglu_quant (fusion 9, ahead of fusion 6), from npu_swiglu or from
    torch-native F.silu(gate) * up (native_swiglu first), planned for the NPU in
    max-autotune; the output equals eager's (within an int8 step of h where eager ran
    torch's silu)."""
    torch.manual_seed(0)
    model = W8A8Expert(native=native_spelling).eval()
    x = torch.randn(14, 64, dtype=torch.bfloat16)
    with torch.no_grad():
        want = model(x)
    counts: collections.Counter = collections.Counter()

    def capture(gm, example_inputs, c):
        counts.update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")

    cfg = config(mode, **(NPU_PLAN if mode == "max-autotune" else {}))
    cfg.post_grad_custom_post_pass = capture
    torch._dynamo.reset()
    backend = op_sdk.get_npu_backend(compiler_config=cfg)
    with torch.no_grad():
        got = torch.compile(model, backend=backend)(x)
    exp = op_sdk.explain(backend)
    summary = exp.summary()
    assert exp.patterns.get("dequant_swiglu_quant") == 1, summary
    assert "swiglu_quant" not in exp.patterns, summary
    assert counts["npu.npu_dequant_swiglu_quant.default"] == 1, (dict(counts), summary)
    assert counts["npu.npu_swiglu.default"] == 0 and counts["npu.npu_dynamic_quant.default"] == 1
    assert counts["npu.npu_quant_matmul.default"] == 2
    if native_spelling:  # eager's torch silu and the kernel's exp differ in the last bits:
        # an int8 step of h may move (tests/ops/test_dequant_swiglu_quant.py)
        err = (got.float() - want.float()).abs().max().item()
        assert err <= 0.02 * want.float().abs().max().item(), err
    else:  # npu_swiglu and npu_dynamic_quant's kernels compute the fused kernel's steps
        assert torch.equal(got, want)


def test_transformers_w8a8_llama_fuses_norm_quant():
    torch.manual_seed(0)
    model = op_sdk.quantize_w8a8(_tiny("llama").eval().to(torch.bfloat16))
    assert model.w8a8_layers == 2 * 7  # q k v o gate up down per layer; lm_head kept
    ids = torch.randint(0, 128, (1, 8))
    with torch.no_grad():
        ref = model(ids).logits
    out, counts, backend = compile_model(model, ids, config())
    exp = op_sdk.explain(backend)
    # post-attention norm of both layers + the input norm of layer 1 (layer 0's reads the
    # embedding: no residual add; the final norm feeds the bf16 lm_head)
    assert exp.patterns.get("add_rms_norm_dynamic_quant") == 3, exp.summary()
    assert counts["npu.npu_add_rms_norm_dynamic_quant.default"] == 3
    err = (out.float() - ref.float()).abs().max().item()
    assert err <= 0.05 * ref.float().abs().max().item(), err


@pytest.mark.parametrize("gated_mlp,fusion,fused", [
    ("epilogue", "swiglu_quant", "npu_swiglu_quant"),
    ("int32", "dequant_swiglu_quant", "npu_dequant_swiglu_quant")])
def test_transformers_w8a8_llama_gated_mlp_fuses_swiglu_quant(gated_mlp, fusion, fused):
    """quantize_w8a8(gated_mlp=...): each MLP's gate and up one int8 GEMM; its SwiGLU and the
    down projection's quantisation become npu_swiglu_quant (the GEMM dequantises: fusion 6)
    or npu_dequant_swiglu_quant (the GEMM's int32 accumulator: fusion 9), one per layer;
    logits close to eager."""
    torch.manual_seed(0)
    model = _tiny("llama").eval().to(torch.bfloat16)
    mlp = model.model.layers[0].mlp
    x = torch.randn(3, mlp.gate_proj.in_features, dtype=torch.bfloat16)
    with torch.no_grad():
        float_out = mlp(x)
    op_sdk.quantize_w8a8(model, gated_mlp=gated_mlp)
    assert model.w8a8_layers == 2 * 7
    assert all(type(layer.mlp) is op_sdk.W8A8GatedMLP for layer in model.model.layers)
    with torch.no_grad():  # the W8A8 MLP against the float one it replaced
        err = (model.model.layers[0].mlp(x).float() - float_out.float()).abs().max().item()
    assert err <= 0.05 * float_out.float().abs().max().item(), err
    ids = torch.randint(0, 128, (1, 8))
    with torch.no_grad():
        ref = model(ids).logits
    out, counts, backend = compile_model(model, ids, config())
    exp = op_sdk.explain(backend)
    assert exp.patterns.get(fusion) == 2, exp.summary()
    assert counts[f"npu.{fused}.default"] == 2 and counts["npu.npu_swiglu.default"] == 0
    err = (out.float() - ref.float()).abs().max().item()
    assert err <= 0.05 * ref.float().abs().max().item(), err


def test_quantize_w8a8_gated_mlp_rules():
    with pytest.raises(ValueError, match="gated_mlp"):
        op_sdk.quantize_w8a8(torch.nn.Sequential(), gated_mlp="fp8")
    with pytest.raises(TypeError, match="W8A8GatedMLP: argument 'mlp'"):
        op_sdk.W8A8GatedMLP(torch.nn.Linear(4, 4))


# ---- Gemma's RMSNorm ---------------------------------------------------------------------

def gemma_norm(x, w, eps=1e-6):
    """GemmaRMSNorm.forward, as transformers writes it."""
    out = x.float()
    out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + eps)
    out = out * (1.0 + w.float())
    return out.type_as(x)


@pytest.mark.parametrize("mode,dtype", [("reduce-overhead", torch.bfloat16),
                                        ("reduce-overhead", torch.float32),
                                        ("max-autotune", torch.float16)])
def test_gemma_norm_becomes_npu_gemma_rms_norm(mode, dtype):
    x = torch.randn(2, 7, 33, dtype=dtype)
    w = (torch.randn(33) * 0.5).to(dtype)
    res = compile_and_run(gemma_norm, [x, w], config(mode, **(NPU_PLAN if mode == "max-autotune"
                                                              else {})))
    assert res.report.match_count("native_gemma_rms_norm") == 1, res.report.summary()
    assert res.report.match_count("native_rms_norm") == 0
    assert res.has(npu.npu_gemma_rms_norm.default) and not res.has(npu.npu_rms_norm.default)
    assert not res.has(aten.rsqrt.default) and not res.has(aten.pow.Tensor_Scalar)
    assert_fused_close(res.outputs, gemma_norm(x, w), [x, w])


def test_gemma_norm_other_offsets_and_weight_dtypes():
    """An offset other than 1 is refused with the reason (native_rms_norm then takes the
    norm, its fp32 weight the sum 2 + weight); a float32 weight with a bfloat16 x fuses in
    float32 (the fp32 form on the upcast x, the cast back kept)."""
    x = torch.randn(2, 7, 32, dtype=torch.bfloat16)
    w = torch.randn(32, dtype=torch.bfloat16)

    def offset_two(x, w):
        out = x.float()
        out = out * torch.rsqrt(out.pow(2).mean(-1, keepdim=True) + 1e-6)
        return (out * (2.0 + w.float())).type_as(x)

    res = compile_and_run(offset_two, [x, w], config())
    assert res.report.match_count("native_gemma_rms_norm") == 0
    assert any("offset by 2.0" in m.reason for m in res.report.misses("native_gemma_rms_norm"))
    assert res.report.match_count("native_rms_norm") == 1 and not res.has(npu.npu_gemma_rms_norm.default)
    assert_fused_close(res.outputs, offset_two(x, w), [x, w])
    w32 = torch.randn(32)
    res = compile_and_run(gemma_norm, [x, w32], config())
    assert res.report.match_count("native_gemma_rms_norm", "fp32") == 1, res.report.summary()
    assert_fused_close(res.outputs, gemma_norm(x, w32), [x, w32])


@pytest.mark.parametrize("mode", MODES)
def test_transformers_gemma_gets_npu_gemma_rms_norm(mode):
    """transformers' Gemma (tiny config, random weights): every GemmaRMSNorm becomes
    npu_gemma_rms_norm, planned for the NPU in max-autotune; logits close to eager."""
    torch.manual_seed(0)
    common = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  head_dim=16)
    model = transformers.GemmaForCausalLM(transformers.GemmaConfig(**common)).eval()
    for m in model.modules():  # Gemma initialises the norm weights to 0: make them count
        if type(m).__name__ == "GemmaRMSNorm":
            m.weight.data.normal_(0, 0.5)
    model = model.to(torch.bfloat16)
    norms = sum(type(m).__name__ == "GemmaRMSNorm" for m in model.modules())
    ids = torch.randint(0, 128, (2, 9))
    with torch.no_grad():
        ref = model(ids).logits
    out, counts, backend = compile_model(model, ids, config(
        mode, **(NPU_PLAN if mode == "max-autotune" else {})))
    summary = op_sdk.explain(backend).summary()
    assert counts["npu.npu_gemma_rms_norm.default"] == norms == 2 * 2 + 1, (dict(counts), summary)
    assert counts["npu.npu_rms_norm.default"] == 0 and counts["aten.rsqrt.default"] == 0
    err = (out.float() - ref.float()).abs().max().item()
    assert err <= 0.02 * ref.float().abs().max().item() + 0.02, err


# ---- DeepSeek's 64-dim rope heads: npu_interleave_rope ----------------------------------

@pytest.mark.parametrize("spelling", ["deinterleave", "pairs"])
@pytest.mark.parametrize("mode", MODES)
def test_64_dim_interleaved_rope_becomes_npu_interleave_rope(spelling, mode):
    """With DeepSeek's rope head dim (64) and cos / sin of (B, 1, S, 64), both interleaved
    spellings become npu_interleave_rope (CANN's InterleaveRope); bit for bit the
    "interleave-half" npu_rotary_mul they become at other head dims."""
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    fn = ds_rope if spelling == "deinterleave" else modeling_deepseek_v3.apply_rotary_pos_emb_interleave
    args = _rope_inputs(torch.bfloat16, head_dim=64)
    res = compile_and_run(fn, args, config(mode, **(NPU_PLAN if mode == "max-autotune" else {})))
    form = "interleave" if spelling == "deinterleave" else "pairs"
    assert res.report.match_count("native_rotary_mul", form) == 2, res.report.summary()
    assert res.targets.count(npu.npu_interleave_rope.default) == 2
    assert not res.has(npu.npu_rotary_mul.default)
    assert_fused_close(res.outputs, fn(*args), args)
    q, k, cos, sin = args
    if spelling == "pairs":
        cos, sin = (torch.cat((t[..., :32], t[..., :32]), -1) for t in (cos, sin))
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    want = (npu.npu_rotary_mul(q, c, s, "interleave-half"), npu.npu_rotary_mul(k, c, s, "interleave-half"))
    for got, w in zip(res.outputs, want):
        assert torch.equal(got, w)


def test_interleaved_rope_outside_interleave_rope_contract_stays_rotary_mul():
    """Head dim 64 but cos / sin per head (not broadcast over N), or dynamic sizes: the
    rotary_mul form (npu_interleave_rope's contract is (B or 1, 1, S or 1, 64), judged on
    static sizes)."""
    def per_head(q, k, cos, sin):
        b, h, s, d = q.shape
        q = q.view(b, h, s, d // 2, 2).transpose(4, 3).reshape(b, h, s, d)
        return (q * cos) + (rotate_half(q) * sin)

    q = torch.randn(2, 4, 7, 64, dtype=torch.bfloat16)
    cos = torch.randn(2, 4, 7, 64).cos().to(torch.bfloat16)
    sin = torch.randn(2, 4, 7, 64).sin().to(torch.bfloat16)
    res = compile_and_run(per_head, [q, q, cos, sin], config())
    assert res.targets.count(npu.npu_rotary_mul.default) == 1
    assert not res.has(npu.npu_interleave_rope.default)
    args = _rope_inputs(torch.bfloat16, head_dim=64)
    for t in args:  # batch and sequence dynamic, the head dim static, as in a model
        torch._dynamo.mark_dynamic(t, 0)
        torch._dynamo.mark_dynamic(t, 2 if t.dim() == 4 else 1)
    res = compile_and_run(ds_rope, args, config())
    assert res.targets.count(npu.npu_rotary_mul.default) == 2, res.report.summary()
    assert not res.has(npu.npu_interleave_rope.default)
    assert_fused_close(res.outputs, ds_rope(*args), args)
