"""npu_fused_infer_attention_score's Triton kernel (op_sdk/triton_kernels/attention.py)
against the operator's reference (on CPU): every layout, GQA, the sparse modes and user
masks, sequence lengths (per batch, cumulative), paged caches of both forms, MLA's rope
parts, pse_shift, the v2's sink, lse, the rows that see no key, NaN, strided and empty
inputs. The kernel rounds the probabilities before the division by the row's sum (the
reference after): outputs within the dtype's tolerance, lse within float32 summation."""

import pytest
import torch

from op_sdk.library import get_op
from tests.ops.test_fused_infer_attention_score import causal_mask
from tests.ops._helpers import bf16, fp16, rand, strided

npu = torch.ops.npu
V1, V2 = "npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2"


def _check(name, args, kwargs, device):
    op = getattr(npu, name)
    ref = op(*args, **kwargs)
    mv = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    out = get_op(name).kernels["cuda"](*[mv(a) for a in args],
                                       **{k: mv(v) for k, v in kwargs.items()})
    assert len(out) == 2
    for o, r in zip(out, ref):
        assert o.shape == r.shape and o.dtype == r.dtype and o.is_contiguous()
    o, r = out[0].cpu().float(), ref[0].float()
    tol = {fp16: 2e-3, bf16: 2e-2}[args[0].dtype]
    torch.testing.assert_close(o, r, atol=tol, rtol=tol, equal_nan=True)
    torch.testing.assert_close(out[1].cpu(), ref[1], atol=2e-5, rtol=2e-5, equal_nan=True)
    return out


@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD", "NSD", "BNSD_BSND", "BSH_NBSD",
                                    "BNSD_NBSD"])
@pytest.mark.parametrize("dtype", [fp16, bf16])
def test_b_layouts(layout, dtype, device):
    torch.manual_seed(0)
    b, sq, skv, n1, n2, d, dv = (1 if layout == "NSD" else 2), 37, 45, 4, 2, 24, 40
    ql = {"BSH": "BSH", "BSND": "BSND", "NSD": "NSD"}.get(layout.split("_")[0], "BNSD")
    shape = {"BSH": lambda s, n, e: (b, s, n * e), "BSND": lambda s, n, e: (b, s, n, e),
             "BNSD": lambda s, n, e: (b, n, s, e), "NSD": lambda s, n, e: (n, s, e)}[ql]
    args = (rand(*shape(sq, n1, d), dtype=dtype), rand(*shape(skv, n2, d), dtype=dtype),
            rand(*shape(skv, n2, dv), dtype=dtype))
    _check(V1, args, {"num_heads": n1, "num_key_value_heads": n2, "input_layout": layout,
                      "scale": 0.2, "softmax_lse_flag": True}, device)


@pytest.mark.parametrize("mode,pre,nxt,sq,skv", [(0, 5, 2, 40, 40), (0, 3, -1, 20, 50),
                                                 (1, 0, 0, 33, 47), (2, 0, 0, 40, 33),
                                                 (3, 0, 0, 33, 70), (3, 0, 0, 50, 20),
                                                 (4, 9, 4, 35, 60), (4, 2, 0, 64, 64)])
def test_sparse_modes(mode, pre, nxt, sq, skv, device):
    torch.manual_seed(1)
    q, k, v = rand(2, 2, sq, 32, dtype=fp16), rand(2, 2, skv, 32, dtype=fp16), \
        rand(2, 2, skv, 32, dtype=fp16)
    mask = (torch.rand(2, 1, sq, skv) > 0.8) if mode in (0, 1) else causal_mask()
    _check(V1, (q, k, v), {"num_heads": 2, "input_layout": "BNSD", "atten_mask": mask,
                           "sparse_mode": mode, "pre_tokens": pre, "next_tokens": nxt,
                           "softmax_lse_flag": True, "actual_seq_lengths_kv": [skv, skv - 7]},
           device)


def test_lengths_pse_and_decode_mask(device):
    torch.manual_seed(2)
    q, k, v = rand(3, 21, 64, dtype=bf16), rand(3, 40, 32, dtype=bf16), rand(3, 40, 32, dtype=bf16)
    _check(V1, (q, k, v), {"num_heads": 4, "num_key_value_heads": 2, "softmax_lse_flag": True,
                           "actual_seq_lengths": [21, 5, 0], "actual_seq_lengths_kv": [40, 9, 3],
                           "pse_shift": rand(1, 4, 24, 48, dtype=bf16)}, device)
    qd = rand(3, 1, 64, dtype=bf16)
    m = torch.rand(3, 40) > 0.5
    _check(V1, (qd, k, v), {"num_heads": 4, "num_key_value_heads": 1 * 2, "atten_mask": m,
                            "sparse_mode": 3, "softmax_lse_flag": True,
                            "actual_seq_lengths_kv": [40, 17, 0]}, device)


@pytest.mark.parametrize("layout", ["TND", "NTD", "TND_NTD", "NTD_TND"])
def test_t_layouts(layout, device):
    torch.manual_seed(3)
    q, k, v = rand(70, 4, 32, dtype=bf16), rand(90, 2, 32, dtype=bf16), rand(90, 2, 16, dtype=bf16)
    if layout.startswith("NTD"):
        q, k, v = (t.transpose(0, 1).contiguous() for t in (q, k, v))
    _check(V1, (q, k, v), {"num_heads": 4, "num_key_value_heads": 2, "input_layout": layout,
                           "actual_seq_lengths": [30, 30, 66], "actual_seq_lengths_kv": [40, 41, 90],
                           "sparse_mode": 3, "atten_mask": causal_mask(),
                           "softmax_lse_flag": True}, device)


@pytest.mark.parametrize("form", ["BnBsH", "BnNBsD"])
def test_paged(form, device):
    torch.manual_seed(4)
    n2, d, bs = 2, 32, 16
    cache_k = rand(9, bs, n2 * d, dtype=fp16) if form == "BnBsH" else rand(9, n2, bs, d, dtype=fp16)
    cache_v = torch.randn_like(cache_k.float()).half()
    table = torch.tensor([[8, 1, 4, 0], [2, 6, 0, 0]], dtype=torch.int32)
    q = rand(2, 1, 4 * d, dtype=fp16) if form == "BnBsH" else rand(2, 4, 1, d, dtype=fp16)
    _check(V1, (q, cache_k, cache_v), {"num_heads": 4, "num_key_value_heads": n2,
                                       "input_layout": "BSH" if form == "BnBsH" else "BNSD",
                                       "block_table": table, "block_size": bs,
                                       "actual_seq_lengths_kv": [57, 20],
                                       "softmax_lse_flag": True}, device)


def test_rope_and_sink(device):
    torch.manual_seed(5)
    q, k, v = rand(2, 8, 5, 64, dtype=bf16), rand(2, 1, 33, 64, dtype=bf16), rand(2, 1, 33, 64, dtype=bf16)
    qr, kr = rand(2, 8, 5, 16, dtype=bf16), rand(2, 1, 33, 16, dtype=bf16)
    _check(V1, (q, k, v), {"num_heads": 8, "num_key_value_heads": 1, "input_layout": "BNSD",
                           "query_rope": qr, "key_rope": kr, "scale": 0.1, "sparse_mode": 3,
                           "atten_mask": causal_mask(), "softmax_lse_flag": True}, device)
    _check(V2, (q, k, v), {"num_query_heads": 8, "num_key_value_heads": 1,
                           "input_layout": "BNSD", "learnable_sink": rand(8, dtype=bf16) * 4,
                           "return_softmax_lse": True}, device)


def test_unseen_rows_nan_strided_and_empty(device):
    torch.manual_seed(6)
    q, k, v = rand(1, 2, 20, 16, dtype=fp16), rand(1, 2, 24, 16, dtype=fp16), rand(1, 2, 24, 16, dtype=fp16)
    m = torch.zeros(20, 24, dtype=torch.bool)
    m[3] = True
    q[0, 1, 7, 2] = float("nan")
    out = _check(V1, (q, k, v), {"num_heads": 2, "input_layout": "BNSD", "atten_mask": m,
                                 "sparse_mode": 1, "softmax_lse_flag": True}, device)
    assert (out[0][0, :, 3].cpu() == 0).all() and torch.isinf(out[1][0, :, 3]).all()
    assert torch.isnan(out[0][0, 1, 7].cpu()).all()
    _check(V1, (strided(rand(2, 9, 32, dtype=fp16)), strided(rand(2, 11, 32, dtype=fp16)),
                strided(rand(2, 11, 32, dtype=fp16))), {"num_heads": 2}, device)
    _check(V1, (rand(0, 3, 32, dtype=fp16), rand(0, 4, 32, dtype=fp16), rand(0, 4, 32, dtype=fp16)),
           {"num_heads": 2, "softmax_lse_flag": True}, device)
    _check(V1, (rand(2, 3, 32, dtype=fp16), rand(2, 0, 32, dtype=fp16), rand(2, 0, 32, dtype=fp16)),
           {"num_heads": 2, "softmax_lse_flag": True}, device)


def test_value_checks_run_before_the_kernel(device):
    q = rand(1, 1, 32, dtype=fp16).to(device)
    kc = rand(2, 16, 32, dtype=fp16).to(device)
    table = torch.tensor([[0, 5]], dtype=torch.int32, device=device)
    with pytest.raises(RuntimeError, match=f"{V1}: argument 'block_table'"):
        get_op(V1).kernels["cuda"](q, kc, kc, num_heads=2, block_table=table, block_size=16,
                                   actual_seq_lengths_kv=[20])
