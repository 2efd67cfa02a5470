# Conformance port of the upstream unit test of npu_kv_rmsnorm_rope_cache.
# Upstream: Ascend/op-plugin, test/test_custom_ops/test_npu_kv_rms_norm_rope_cache.py
#   read at commit 517f2e7d0f202f38b76310706cb977ca2388ad21. Rewritten for op_sdk on CPU,
#   not copied.
"""npu_kv_rmsnorm_rope_cache against upstream's golden (its supported_op_exec, method_mode
0: kv of 512 + 64), compared with torch_npu's assertRtolEqual as upstream compares, and its
reference bit for bit (the golden's float32 steps are the contract's). Upstream's four
aclnnV1 cases (bfloat16, 64 sequences of one token, 576 pages of 128, caches filled with 9:
PA_BNSD, PA_BLK_NZ, PA_BLK_BNSD, PA_NZ) run here; its golden's quantised path (int8 caches,
``round(v * scale)`` clipped), which no upstream case calls, runs on the paged modes too.
Upstream's four method_mode-1 cases pass ``v`` (aclnnKvRmsNormRopeCacheV2, kv of 192):
op_sdk refuses that form by name, which is checked."""

import pytest
import torch

from tests.conformance._golden import assert_rtol_equal, npu

B, S, PAGES, PAGE = 64, 1, 576, 128


def generate_inputs(cache_mode, quant, dtype=torch.bfloat16, seed=0):
    """Upstream's generate_inputs for method_mode 0, with its value ranges."""
    torch.manual_seed(seed)
    kv = torch.randn(B, 1, S, 576, dtype=dtype) * 8 - 10
    gamma = torch.randn(512, dtype=dtype) * 990 - 1000
    cos = torch.randn(B, 1, S, 64, dtype=dtype)
    sin = torch.randn(B, 1, S, 64, dtype=dtype) * 0.02 - 0.01
    k_cache = torch.ones(PAGES, PAGE, 1, 64, dtype=dtype) * 9
    ckv_cache = torch.ones(PAGES, PAGE, 1, 512, dtype=dtype) * 9
    if "BLK" in cache_mode:
        n = B * ((S + PAGE - 1) // PAGE)
        index = torch.arange(0, n * PAGE, PAGE, dtype=torch.int64)
    else:
        index = torch.arange(0, B * S, dtype=torch.int64)
    scales = {}
    if quant:
        k_cache, ckv_cache = k_cache.to(torch.int8), ckv_cache.to(torch.int8)
        scales = {"k_rope_scale": torch.randn(64), "c_kv_scale": torch.randn(512)}
    return (kv, gamma, cos, sin, index, k_cache, ckv_cache), scales


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def golden(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale=None, c_kv_scale=None,
           epsilon=1e-5, cache_mode="Norm"):
    """Upstream's supported_op_exec, method_mode 0 (its loops over tokens kept)."""
    b, _, s, _ = kv.shape
    block_num, block_size = k_cache.shape[:2]
    d0 = 16 if k_rope_scale is None else 32
    rms_in, rope_in = (t.float() for t in kv.split([512, 64], dim=-1))
    y = rms_in / torch.sqrt(torch.mean(rms_in ** 2, dim=-1, keepdim=True) + epsilon)
    y = y * gamma.float()
    k = rope_in.view(b, 1, s, 32, 2).transpose(4, 3).reshape(b, 1, s, 64)
    k_embed = k * cos.float() + _rotate_half(k) * sin.float()
    k_embed_out, y_out = k_embed.to(kv.dtype), y.to(kv.dtype)
    if k_rope_scale is not None:
        k_embed = torch.round(k_embed * k_rope_scale).clip(-128, 127).to(torch.int8)
        y = torch.round(y * c_kv_scale).clip(-128, 127).to(torch.int8)
    else:
        k_embed, y = k_embed.to(k_cache.dtype), y.to(k_cache.dtype)
    k_cache, ckv_cache = k_cache.clone(), ckv_cache.clone()
    if cache_mode in ("PA", "PA_BNSD"):
        kc, vc = k_cache.reshape(-1, 64), ckv_cache.reshape(-1, 512)
        for bi in range(b):
            for t in range(s):
                off = int(index[bi * s + t])
                if off >= 0:
                    kc[off], vc[off] = k_embed[bi, 0, t], y[bi, 0, t]
    else:
        nz = cache_mode.endswith("NZ")
        kc = k_cache.view(block_num, 1, -1, block_size, d0) if nz else k_cache
        vc = ckv_cache.view(block_num, 1, -1, block_size, d0) if nz else ckv_cache
        pages = index.shape[0] // b
        for bi in range(b):
            for t in range(s):
                if "BLK" in cache_mode:
                    page = int(index[bi * pages + t // block_size])
                    if page < 0:
                        continue
                    pid, off = page // block_size, t % block_size
                else:
                    page = int(index[bi * s + t])
                    if page < 0:
                        continue
                    pid, off = page // block_size, page % block_size
                if nz:
                    kc[pid, 0, :, off] = k_embed[bi, 0, t].reshape(-1, d0)
                    vc[pid, 0, :, off] = y[bi, 0, t].reshape(-1, d0)
                else:
                    kc[pid, off, 0], vc[pid, off, 0] = k_embed[bi, 0, t], y[bi, 0, t]
    return k_cache, ckv_cache, k_embed_out, y_out


@pytest.mark.parametrize("quant", [False, True], ids=["upstream", "int8"])
@pytest.mark.parametrize("cache_mode", ["PA_BNSD", "PA_BLK_NZ", "PA_BLK_BNSD", "PA_NZ"])
def test_npu_kv_rmsnorm_rope_cache(cache_mode, quant):
    args, scales = generate_inputs(cache_mode, quant)
    want = golden(*args, **scales, cache_mode=cache_mode)
    got = npu.npu_kv_rmsnorm_rope_cache(*args, **scales, epsilon=1e-5, cache_mode=cache_mode,
                                        is_output_kv=True)
    for g, w in zip(got, want):  # the operator (the native kernel on CPU), as upstream compares
        assert g.dtype == w.dtype and g.shape == w.shape
        assert_rtol_equal(w.float() if w.dtype == torch.int8 else w,
                          g.float() if g.dtype == torch.int8 else g, prec=0.04, prec16=0.04)
    # the reference, whose float32 steps are the golden's: bit for bit
    ref = torch.ops.op_sdk_reference.npu_kv_rmsnorm_rope_cache(
        *args, **scales, epsilon=1e-5, cache_mode=cache_mode, is_output_kv=True)
    for g, w in zip(ref, want):
        assert torch.equal(g, w)


def test_upstream_v2_form_is_refused_by_name():
    """Upstream's method_mode 1 (v of 128, kv of 192 through aclnnKvRmsNormRopeCacheV2)."""
    kv = torch.randn(2, 1, 1, 192, dtype=torch.bfloat16)
    v = torch.randn(2, 1, 1, 128, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="npu_kv_rmsnorm_rope_cache.*'v'"):
        npu.npu_kv_rmsnorm_rope_cache(
            kv, torch.randn(192, dtype=torch.bfloat16), torch.randn(2, 1, 1, 64, dtype=kv.dtype),
            torch.randn(2, 1, 1, 64, dtype=kv.dtype), torch.arange(2),
            torch.zeros(4, 16, 1, 192, dtype=kv.dtype), torch.zeros(4, 16, 1, 128, dtype=kv.dtype),
            v=v, cache_mode="PA_BNSD")
