# Conformance port of the upstream unit test of npu_qkv_rms_norm_rope_cache.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_qkv_rms_norm_rope_cache.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21. Rewritten for op_sdk on CPU,
#   not copied.
"""npu_qkv_rms_norm_rope_cache against upstream's golden (its supported_op_exec: per-head
RMSNorm dividing by the root, rotate-half RoPE over the head, k / v divided by their scale,
rounded and clipped, scattered into PA_NZ caches by a loop over tokens), compared as upstream
compares (assertRtolEqual), and its reference bit for bit. Upstream's one case (float16, 72 x 2 tokens, 16
/ 1 / 1 heads of 128, 11898 blocks of 128, int8 caches, is_output_qkv) is marked skipped
there ("Skip ... now"); it runs here, with the golden on two smaller calls (bfloat16, and
float caches without scales: the golden's unquantised path, which upstream's case does not
take)."""

import random

import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu


def generate_inputs(b, s, nq, nk, nv, d, block_num, block_size, quant, dtype, seed=0):
    """Upstream's generate_inputs (PA_NZ): caches of 9s, slots sampled from [-1, slots)."""
    torch.manual_seed(seed)
    random.seed(seed)
    n = nq + nk + nv
    qkv = torch.randn(b * s, n * d, dtype=dtype)
    q_gamma, k_gamma = torch.randn(d, dtype=dtype), torch.randn(d, dtype=dtype)
    cos, sin = torch.randn(b * s, d, dtype=dtype), torch.randn(b * s, d, dtype=dtype)
    c0 = 32 if quant else 16
    q_out = torch.ones(b * s, nq * d, dtype=dtype) * 9
    k_cache = torch.ones(block_num, nk * d // c0, block_size, c0, dtype=dtype) * 9
    v_cache = torch.ones(block_num, nv * d // c0, block_size, c0, dtype=dtype) * 9
    data = list(range(-1, block_num * block_size))
    index = torch.tensor(random.sample(data, b * s), dtype=torch.int64)
    scales = {}
    if quant:
        k_cache, v_cache = k_cache.to(torch.int8), v_cache.to(torch.int8)
        scales = {"k_scale": torch.randn(nk, d), "v_scale": torch.randn(nv, d)}
    qkv, q_gamma, k_gamma = 200 * qkv - 100, 200 * q_gamma - 100, 200 * k_gamma - 100
    sin, cos = 2 * sin - 1, 2 * cos - 1
    return (qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, [b, s, n, d],
            [nq, nk, nv]), scales


def golden(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, heads,
           k_scale=None, v_scale=None, epsilon=1e-6):
    """Upstream's supported_op_exec (PA_NZ), outputs in qkv's dtype / int8 as it casts them."""
    b, s, _, d = qkv_size
    nq, nk, nv = heads

    def rms_norm(x, g):
        return x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + epsilon) * g

    def rope(x, c, sn):
        half = x.shape[-1] // 2
        return x * c + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sn

    def quant(x, scale):
        return x if scale is None else torch.round(x / scale).clamp(-128, 127)

    def scatter(x, cache):
        bn, _, bs, c0 = cache.shape
        n = x.shape[2]
        cache = cache.clone().reshape(bn, n, d // c0, bs, c0)
        x = x.reshape(b * s, n, d)
        for t in range(len(index)):
            v = int(index[t])
            if v < 0:
                continue
            for i in range(d // c0):
                cache[v // bs, :, i, v % bs, :] = x[t, :, i * c0:(i + 1) * c0].to(cache.dtype)
        return cache.reshape(bn, n * d // c0, bs, c0)

    x = qkv.float()
    q, k, v = x.split([nq * d, nk * d, nv * d], dim=-1)
    c = cos.float().view(b, s, 1, d)
    sn = sin.float().view(b, s, 1, d)
    q4 = rope(rms_norm(q.view(b, s, nq, d), q_gamma.float()), c, sn)
    k4 = rope(rms_norm(k.view(b, s, nk, d), k_gamma.float()), c, sn)
    v4 = v.view(b, s, nv, d)
    q_res = q4.reshape(b * s, nq * d).to(qkv.dtype)
    k_before = k4.reshape(b * s, nk * d).to(qkv.dtype)
    v_before = v4.reshape(b * s, nv * d).to(qkv.dtype)
    k_cache = scatter(quant(k4, k_scale), k_cache)
    v_cache = scatter(quant(v4, v_scale), v_cache)
    return q_res, k_cache, v_cache, q_res, k_before, v_before


CASES = [
    pytest.param((72, 2, 16, 1, 1, 128, 11898, 128, True, torch.float16), id="upstream"),
    pytest.param((4, 3, 8, 2, 2, 64, 40, 32, True, torch.bfloat16), id="bf16-int8"),
    pytest.param((4, 3, 8, 2, 2, 64, 40, 32, False, torch.float16), id="fp16-float-caches"),
]


@pytest.mark.parametrize("case", CASES)
def test_npu_qkv_rms_norm_rope_cache(case):
    *sizes, quant, dtype = case
    args, scales = generate_inputs(*sizes, quant, dtype)
    want = golden(*args, **scales)
    q_out, k_cache, v_cache = (t.clone() for t in args[6:9])
    before = npu.npu_qkv_rms_norm_rope_cache(*args[:6], q_out, k_cache, v_cache, *args[9:],
                                             **scales, epsilon=1e-6, cache_mode="PA_NZ",
                                             is_output_qkv=True)
    got = (q_out, k_cache, v_cache, *before)
    prec = 0.001 if dtype == torch.float16 else 0.004
    for g, w in zip(got, want):  # the operator (the native kernel on CPU), as upstream compares
        assert g.dtype == w.dtype and g.shape == w.shape
        assert_rtol_equal(w.float() if w.dtype == torch.int8 else w,
                          g.float() if g.dtype == torch.int8 else g, prec=prec, prec16=prec)
    # the reference, whose float32 steps are the golden's: bit for bit
    ref = torch.ops.op_sdk_reference.npu_qkv_rms_norm_rope_cache_functional(
        *args, **scales, is_output_qkv=True)
    for g, w in zip((*ref[3:], *ref[:3]), want):
        assert torch.equal(g, w)
