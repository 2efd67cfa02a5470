"""npu_fused_infer_attention_score and its v2, in torch_npu's schemas (npu::) and TorchAir's
(air::): the reference against an independent float64 attention over every layout, GQA,
masks and sparse modes, sequence lengths (per batch and cumulative), paged caches, MLA's
rope parts, the v2's learnable sink, softmax_lse, the rows that see no key, NaN / inf,
non-contiguous and empty inputs; the value checks (lengths, block ids, the causal mask);
the four forms agreeing; one call under torch.compile with dynamic shapes."""

import math

import pytest
import torch

import op_sdk
from tests.ops._helpers import T, bf16, fp16, fp32, npu, rand, strided

i8, i32, i64, u8, boolean = torch.int8, torch.int32, torch.int64, torch.uint8, torch.bool
air = torch.ops.air

_V1 = ("npu_fused_infer_attention_score(Tensor query, Tensor key, Tensor value, *, "
       "Tensor? pse_shift=None, Tensor? atten_mask=None, SymInt[]? actual_seq_lengths=None, "
       "SymInt[]? actual_seq_lengths_kv=None, Tensor? dequant_scale1=None, "
       "Tensor? quant_scale1=None, Tensor? dequant_scale2=None, Tensor? quant_scale2=None, "
       "Tensor? quant_offset2=None, Tensor? antiquant_scale=None, "
       "Tensor? antiquant_offset=None, Tensor? key_antiquant_scale=None, "
       "Tensor? key_antiquant_offset=None, Tensor? value_antiquant_scale=None, "
       "Tensor? value_antiquant_offset=None, Tensor? block_table=None, "
       "Tensor? query_padding_size=None, Tensor? kv_padding_size=None, "
       "Tensor? key_shared_prefix=None, Tensor? value_shared_prefix=None, "
       "SymInt[]? actual_shared_prefix_len=None, Tensor? query_rope=None, "
       "Tensor? key_rope=None, Tensor? key_rope_antiquant_scale=None, int num_heads=1, "
       "float scale=1., int pre_tokens=2147483647, int next_tokens=2147483647, "
       "str input_layout=\"BSH\", int num_key_value_heads=0, int sparse_mode=0, "
       "int inner_precise=0, int block_size=0, int antiquant_mode=0, "
       "int key_antiquant_mode=0, int value_antiquant_mode=0, bool softmax_lse_flag=False) "
       "-> (Tensor, Tensor)")
_V2 = ("npu_fused_infer_attention_score_v2(Tensor query, Tensor key, Tensor value, *, "
       "Tensor? query_rope=None, Tensor? key_rope=None, Tensor? pse_shift=None, "
       "Tensor? atten_mask=None, SymInt[]? actual_seq_qlen=None, "
       "SymInt[]? actual_seq_kvlen=None, Tensor? block_table=None, "
       "Tensor? dequant_scale_query=None, Tensor? dequant_scale_key=None, "
       "Tensor? dequant_offset_key=None, Tensor? dequant_scale_value=None, "
       "Tensor? dequant_offset_value=None, Tensor? dequant_scale_key_rope=None, "
       "Tensor? quant_scale_out=None, Tensor? quant_offset_out=None, "
       "Tensor? quant_scale_p=None, Tensor? learnable_sink=None, int num_query_heads=1, "
       "int num_key_value_heads=0, float softmax_scale=1., int pre_tokens=2147483647, "
       "int next_tokens=2147483647, str input_layout=\"BSH\", int sparse_mode=0, "
       "int block_size=0, int query_quant_mode=0, int key_quant_mode=0, "
       "int value_quant_mode=0, int inner_precise=0, bool return_softmax_lse=False, "
       "int? query_dtype=None, int? key_dtype=None, int? value_dtype=None, "
       "int? query_rope_dtype=None, int? key_rope_dtype=None, "
       "int? key_shared_prefix_dtype=None, int? value_shared_prefix_dtype=None, "
       "int? dequant_scale_query_dtype=None, int? dequant_scale_key_dtype=None, "
       "int? dequant_scale_value_dtype=None, int? dequant_scale_key_rope_dtype=None, "
       "int? out_dtype=None) -> (Tensor, Tensor)")
SCHEMAS = [_V1, _V2]

GE_TYPES = {"npu::npu_fused_infer_attention_score": "FusedInferAttentionScore",
            "npu::npu_fused_infer_attention_score_v2": "FusedInferAttentionScore",
            "air::npu_fused_infer_attention_score": "FusedInferAttentionScore",
            "air::npu_fused_infer_attention_score_v2": "FusedInferAttentionScore"}

_TORCH_NPUS = ("torch_npu defines it (2.13.0: op-plugin's FusedInferAttentionScore binding), "
               "so a binding of op_sdk's would never register")
NO_ACLNN_BINDING = {"npu::npu_fused_infer_attention_score": _TORCH_NPUS,
                    "npu::npu_fused_infer_attention_score_v2": _TORCH_NPUS}

V1, V2 = "npu_fused_infer_attention_score", "npu_fused_infer_attention_score_v2"
A1, A2 = "air::npu_fused_infer_attention_score", "air::npu_fused_infer_attention_score_v2"


def causal_mask():
    return torch.ones(2048, 2048, dtype=boolean).triu(1)


def samples():
    q, k, v = rand(2, 5, 64, dtype=fp16), rand(2, 7, 32, dtype=fp16), rand(2, 7, 32, dtype=fp16)
    qn, kn, vn = rand(2, 4, 6, 16, dtype=bf16), rand(2, 2, 9, 16, dtype=bf16), \
        rand(2, 2, 9, 16, dtype=bf16)
    qt, kt = rand(7, 4, 16, dtype=bf16), rand(10, 4, 16, dtype=bf16)
    cache_k, cache_v = rand(6, 16, 32, dtype=fp16), rand(6, 16, 32, dtype=fp16)
    table = torch.tensor([[3, 0], [5, 1]], dtype=i32)
    return [
        (V1, (q, k, v), {"num_heads": 4, "num_key_value_heads": 2, "scale": 0.25}),
        (V1, (qn, kn, vn), {"num_heads": 4, "num_key_value_heads": 2, "input_layout": "BNSD",
                            "atten_mask": torch.rand(1, 1, 6, 9) > 0.7, "pre_tokens": 3,
                            "next_tokens": 1, "softmax_lse_flag": True,
                            "actual_seq_lengths_kv": [9, 5]}),
        (V1, (qt, kt, kt.clone()), {"num_heads": 4, "input_layout": "TND",
                                    "actual_seq_lengths": [3, 7],
                                    "actual_seq_lengths_kv": [4, 10], "sparse_mode": 3,
                                    "atten_mask": causal_mask(), "softmax_lse_flag": True}),
        (V1, (rand(2, 1, 64, dtype=fp16), cache_k, cache_v),
         {"num_heads": 4, "num_key_value_heads": 2, "block_table": table, "block_size": 16,
          "actual_seq_lengths_kv": [20, 9], "input_layout": "BSH"}),
        (V2, (q, k, v), {"num_query_heads": 4, "num_key_value_heads": 2, "softmax_scale": 0.3,
                         "pre_tokens": 5, "next_tokens": 0, "return_softmax_lse": True}),
        (V2, (qn, kn, vn), {"num_query_heads": 4, "num_key_value_heads": 2,
                            "input_layout": "BNSD_BSND", "softmax_scale": 0.3,
                            "learnable_sink": rand(4, dtype=bf16), "return_softmax_lse": True}),
        (A1, (q, k, v), {"num_heads": 4, "num_key_value_heads": 2,
                         "actual_seq_lengths": torch.tensor([5, 3]),
                         "actual_seq_lengths_kv": torch.tensor([7, 2])}),
        (A2, (qt, kt, kt.clone()), {"num_query_heads": 4, "input_layout": "TND",
                                    "actual_seq_qlen": torch.tensor([3, 7]),
                                    "actual_seq_kvlen": torch.tensor([4, 10]),
                                    "return_softmax_lse": True}),
    ]


def meta_grid():
    """Calls on which op_sdk's CPU kernel, its fake and torch_npu's Meta functions agree on
    output shapes and dtypes: every layout, both dtypes, GQA, Dv != D, paged caches of both
    forms, the lse flag."""
    cases = []
    b, sq, skv, n1, n2, d, dv = 2, 3, 5, 4, 2, 16, 8
    qs = {"BSH": (b, sq, n1 * d), "BSND": (b, sq, n1, d), "BNSD": (b, n1, sq, d),
          "NSD": (n1, sq, d), "TND": (b * sq, n1, d), "NTD": (n1, b * sq, d)}
    kvs = {"BSH": lambda dd: (b, skv, n2 * dd), "BSND": lambda dd: (b, skv, n2, dd),
           "BNSD": lambda dd: (b, n2, skv, dd), "NSD": lambda dd: (n2, skv, dd),
           "TND": lambda dd: (b * skv, n2, dd), "NTD": lambda dd: (n2, b * skv, dd)}
    from op_sdk.ops.fused_infer_attention_score import LAYOUTS
    for layout, (ql, _) in LAYOUTS.items():
        for dt in (fp16, bf16):
            for lse in (False, True):
                kw = {"num_heads": n1, "num_key_value_heads": n2, "input_layout": layout,
                      "softmax_lse_flag": lse}
                if ql in ("TND", "NTD"):
                    kw["actual_seq_lengths"] = [sq, 2 * sq]
                    kw["actual_seq_lengths_kv"] = [skv, 2 * skv]
                cases.append((V1, (rand(*qs[ql], dtype=dt), rand(*kvs[ql](d), dtype=dt),
                                   rand(*kvs[ql](dv), dtype=dt)), kw))
    table = torch.tensor([[0, 1], [2, 3]], dtype=i32)
    for ql, k_shape, v_shape in [("BSH", (4, 16, n2 * d), (4, 16, n2 * dv)),
                                 ("BNSD", (4, n2, 16, d), (4, n2, 16, dv))]:
        cases.append((V1, (rand(*qs[ql], dtype=fp16), rand(*k_shape, dtype=fp16),
                           rand(*v_shape, dtype=fp16)),
                      {"num_heads": n1, "num_key_value_heads": n2, "input_layout": ql,
                       "block_table": table, "block_size": 16, "actual_seq_lengths_kv": [20, 7],
                       "softmax_lse_flag": True}))
    for layout in ("BSH", "BNSD_NBSD", "TND"):
        ql = LAYOUTS[layout][0]
        kw = {"num_query_heads": n1, "num_key_value_heads": n2, "input_layout": layout,
              "return_softmax_lse": True}
        if ql == "TND":
            kw.update(actual_seq_qlen=[sq, 2 * sq], actual_seq_kvlen=[skv, 2 * skv])
        cases.append((V2, (rand(*qs[ql], dtype=bf16), rand(*kvs[ql](d), dtype=bf16),
                           rand(*kvs[ql](d), dtype=bf16)), kw))
    return cases


_QKV = (T(2, 3, 64, dtype=fp16), T(2, 5, 32, dtype=fp16), T(2, 5, 32, dtype=fp16))
_KW = {"num_heads": 4, "num_key_value_heads": 2}
_QKV4 = (T(2, 4, 3, 16, dtype=fp16), T(2, 2, 5, 16, dtype=fp16), T(2, 2, 5, 16, dtype=fp16))
_KW4 = {"num_heads": 4, "num_key_value_heads": 2, "input_layout": "BNSD"}

# (case id, operator, args, kwargs, argument named in the error, exception type)
CASES = [
    ("fia/layout", V1, _QKV, {**_KW, "input_layout": "SBH"}, "input_layout", RuntimeError),
    ("fia/rank", V1, _QKV4, _KW, "query", RuntimeError),
    ("fia/fp32", V1, (T(2, 3, 64), T(2, 5, 32), T(2, 5, 32)), _KW, "query", RuntimeError),
    ("fia/int8-kv", V1, (_QKV[0], T(2, 5, 32, dtype=i8), _QKV[2]), _KW, "key", RuntimeError),
    ("fia/heads", V1, _QKV4, {**_KW4, "num_heads": 8}, "num_heads", RuntimeError),
    ("fia/heads-zero", V1, _QKV, {"num_heads": 0}, "num_heads", RuntimeError),
    ("fia/gqa", V1, _QKV, {"num_heads": 4, "num_key_value_heads": 3}, "num_key_value_heads",
     RuntimeError),
    ("fia/kv-heads", V1, _QKV4, {**_KW4, "num_key_value_heads": 1}, "num_key_value_heads",
     RuntimeError),
    ("fia/head-dim", V1, (_QKV[0], T(2, 5, 48, dtype=fp16), T(2, 5, 48, dtype=fp16)), _KW,
     "key", RuntimeError),
    ("fia/kv-batch", V1, (_QKV[0], T(3, 5, 32, dtype=fp16), T(3, 5, 32, dtype=fp16)), _KW,
     "key", RuntimeError),
    ("fia/value-seq", V1, (_QKV[0], _QKV[1], T(2, 6, 32, dtype=fp16)), _KW, "value",
     RuntimeError),
    ("fia/quant", V1, _QKV, {**_KW, "quant_scale2": T(1)}, "quant_scale2", RuntimeError),
    ("fia/prefix", V1, _QKV, {**_KW, "key_shared_prefix": T(1, 2, 32, dtype=fp16)},
     "key_shared_prefix", RuntimeError),
    ("fia/padding", V1, _QKV, {**_KW, "kv_padding_size": T(1, dtype=i64)}, "kv_padding_size",
     RuntimeError),
    ("fia/sparse-9", V1, _QKV, {**_KW, "sparse_mode": 9}, "sparse_mode", RuntimeError),
    ("fia/all-mask", V1, _QKV, {**_KW, "sparse_mode": 1}, "atten_mask", RuntimeError),
    ("fia/causal-mask-shape", V1, _QKV, {**_KW, "sparse_mode": 3, "atten_mask":
                                         T(3, 5, dtype=boolean)}, "atten_mask", RuntimeError),
    ("fia/mask-dtype", V1, _QKV, {**_KW, "atten_mask": T(3, 5)}, "atten_mask", RuntimeError),
    ("fia/mask-short", V1, _QKV, {**_KW, "atten_mask": T(3, 4, dtype=boolean)}, "atten_mask",
     RuntimeError),
    ("fia/pse", V1, _QKV, {**_KW, "pse_shift": T(2, 4, 3, 5)}, "pse_shift", RuntimeError),
    ("fia/inner-precise", V1, _QKV, {**_KW, "inner_precise": 4}, "inner_precise", RuntimeError),
    ("fia/rope-alone", V1, _QKV, {**_KW, "query_rope": T(2, 3, 32, dtype=fp16)}, "key_rope",
     RuntimeError),
    ("fia/tnd-lengths", V1, (T(6, 4, 16, dtype=bf16), T(8, 4, 16, dtype=bf16),
                             T(8, 4, 16, dtype=bf16)), {"num_heads": 4, "input_layout": "TND"},
     "actual_seq_lengths", RuntimeError),
    ("fia/lengths-count", V1, (T(3, 3, 64, dtype=fp16), T(3, 5, 32, dtype=fp16),
                               T(3, 5, 32, dtype=fp16)), {**_KW, "actual_seq_lengths_kv": [5, 5]},
     "actual_seq_lengths_kv", RuntimeError),
    ("fia/paged-no-lengths", V1, (_QKV[0], T(4, 16, 32, dtype=fp16), T(4, 16, 32, dtype=fp16)),
     {**_KW, "block_table": T(2, 2, dtype=i32), "block_size": 16}, "actual_seq_lengths_kv",
     RuntimeError),
    ("fia/paged-block-size", V1, (_QKV[0], T(4, 16, 32, dtype=fp16), T(4, 16, 32, dtype=fp16)),
     {**_KW, "block_table": T(2, 2, dtype=i32), "block_size": 8,
      "actual_seq_lengths_kv": [5, 5]}, "block_size", RuntimeError),
    ("fia/paged-nz", V1, (_QKV[0], T(4, 2, 1, 16, 16, dtype=fp16),
                          T(4, 2, 1, 16, 16, dtype=fp16)),
     {**_KW, "block_table": T(2, 2, dtype=i32), "block_size": 16,
      "actual_seq_lengths_kv": [5, 5]}, "key", RuntimeError),
    ("fia-v2/paged-no-lengths", V2, (_QKV[0], T(4, 16, 32, dtype=fp16), T(4, 16, 32, dtype=fp16)),
     {"num_query_heads": 4, "num_key_value_heads": 2, "block_table": T(2, 2, dtype=i32),
      "block_size": 16}, "actual_seq_kvlen", RuntimeError),
    ("fia-v2/quant", V2, _QKV, {"num_query_heads": 4, "num_key_value_heads": 2,
                                "quant_scale_out": T(1)}, "quant_scale_out", RuntimeError),
    ("fia-v2/out-dtype", V2, _QKV, {"num_query_heads": 4, "num_key_value_heads": 2,
                                    "out_dtype": 1}, "out_dtype", RuntimeError),
    ("fia-v2/key-dtype", V2, _QKV, {"num_query_heads": 4, "num_key_value_heads": 2,
                                    "key_dtype": 290}, "key_dtype", RuntimeError),
    ("fia-v2/sink", V2, _QKV, {"num_query_heads": 4, "num_key_value_heads": 2,
                               "learnable_sink": T(2, dtype=fp16)}, "learnable_sink",
     RuntimeError),
    ("fia-air/layout", A1, _QKV, {**_KW, "input_layout": "SBH"}, "input_layout", RuntimeError),
    ("fia-air/lengths-rank", A1, _QKV, {**_KW, "actual_seq_lengths": T(1, 2, dtype=i64)},
     "actual_seq_lengths", RuntimeError),
    ("fia-air-v2/lengths-dtype", A2, _QKV, {"num_query_heads": 4, "num_key_value_heads": 2,
                                            "actual_seq_kvlen": T(2)}, "actual_seq_kvlen",
     RuntimeError),
    ("fia-air-v2/heads", A2, _QKV4, {"num_query_heads": 8, "num_key_value_heads": 2,
                                     "input_layout": "BNSD"}, "num_heads", RuntimeError),
]

# ---- an independent attention: float64, one (batch, head) at a time ------------------------

def attention64(q, k, v, scale, visible=None, pse=None, qr=None, kr=None, sink=None):
    """q (N1, Sq, D), k / v (N2, Skv, D*) -> out (N1, Sq, Dv), lse (N1, Sq), float64; a row
    with no visible key gives 0 and lse inf."""
    n1, n2 = q.shape[0], k.shape[0]
    out = torch.zeros(n1, q.shape[1], v.shape[2], dtype=torch.float64)
    lse = torch.full((n1, q.shape[1]), math.inf, dtype=torch.float64)
    for h in range(n1):
        kh = h // (n1 // n2)
        s = q[h].double() @ k[kh].double().T
        if qr is not None:
            s = s + qr[h].double() @ kr[kh].double().T
        s = s * scale
        if pse is not None:
            s = s + pse[h].double()
        if visible is not None:
            s = s.masked_fill(~visible, -math.inf)
        if sink is not None:
            s = torch.cat([s, torch.full((s.shape[0], 1), float(sink[h]), dtype=torch.float64)], 1)
        for i in range(s.shape[0]):
            row = s[i]
            if not torch.isfinite(row).any():
                continue
            p = torch.softmax(row, 0)
            lse[h, i] = torch.logsumexp(row, 0)
            out[h, i] = p[:k.shape[1]] @ v[kh].double()
    return out, lse


def close(out, ref, dtype):
    atol = {fp16: 3e-3, bf16: 2e-2}[dtype]
    torch.testing.assert_close(out.double(), ref, atol=atol, rtol=atol)


def bnsd(t, layout, n):
    """A tensor in ``layout`` as (B, N, S, D)."""
    if layout == "BSH":
        return t.reshape(t.shape[0], t.shape[1], n, -1).transpose(1, 2)
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "NSD":
        return t.unsqueeze(0)
    return t


def from_bnsd(t, layout):
    if layout == "BSH":
        return t.transpose(1, 2).reshape(t.shape[0], t.shape[2], -1)
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "NBSD":
        return t.transpose(0, 1)
    if layout == "NSD":
        return t[0]
    return t


# ---- the layouts, GQA, the scale and lse ----------------------------------------------------

@pytest.mark.parametrize("dtype", [fp16, bf16])
@pytest.mark.parametrize("layout", ["BSH", "BSND", "BNSD", "NSD", "BNSD_BSND", "BSH_BNSD",
                                    "BSND_BNSD", "BSH_NBSD", "BSND_NBSD", "BNSD_NBSD"])
@pytest.mark.parametrize("sizes", [(2, 5, 7, 4, 2, 16, 16), (1, 1, 9, 8, 1, 32, 16),
                                   (3, 4, 1, 2, 2, 8, 24)])
def test_b_layouts_against_float64(dtype, layout, sizes):
    b, sq, skv, n1, n2, d, dv = sizes
    if layout == "NSD":
        b = 1
    torch.manual_seed(1)
    ql, ol = op_sdk.ops.fused_infer_attention_score.LAYOUTS[layout]
    q4, k4, v4 = rand(b, n1, sq, d, dtype=dtype), rand(b, n2, skv, d, dtype=dtype), \
        rand(b, n2, skv, dv, dtype=dtype)
    conv = {"BSH": lambda t: t.transpose(1, 2).reshape(t.shape[0], t.shape[2], -1),
            "BSND": lambda t: t.transpose(1, 2).contiguous(), "BNSD": lambda t: t,
            "NSD": lambda t: t[0]}[ql]
    out, lse = npu.npu_fused_infer_attention_score(
        conv(q4), conv(k4), conv(v4), num_heads=n1, num_key_value_heads=n2, scale=0.3,
        input_layout=layout, softmax_lse_flag=True)
    refs = [attention64(q4[i], k4[i], v4[i], 0.3) for i in range(b)]
    ref_out = torch.stack([r[0] for r in refs])
    ref_lse = torch.stack([r[1] for r in refs])
    assert out.dtype == dtype and out.is_contiguous()
    close(out, from_bnsd(ref_out, ol), dtype)
    assert lse.shape == (b, n1, sq, 1) and lse.dtype == fp32
    torch.testing.assert_close(lse.squeeze(-1).double(), ref_lse, atol=1e-5, rtol=1e-5)


def test_lse_is_empty_without_the_flag():
    out, lse = npu.npu_fused_infer_attention_score(rand(1, 2, 16, dtype=fp16),
                                                   rand(1, 3, 16, dtype=fp16),
                                                   rand(1, 3, 16, dtype=fp16))
    assert lse.shape == (0,) and lse.dtype == fp32 and out.shape == (1, 2, 16)


# ---- masks and sparse modes -----------------------------------------------------------------

def _band(sq, skv, lo, hi):
    """True where lo <= j - i <= hi."""
    i = torch.arange(sq).unsqueeze(1)
    j = torch.arange(skv).unsqueeze(0)
    return (j - i >= lo) & (j - i <= hi)


@pytest.mark.parametrize("sq,skv", [(6, 6), (4, 9), (7, 5)])
@pytest.mark.parametrize("mode,pre,nxt", [(0, 2, 1), (0, 10, -1), (0, 2147483647, 2147483647),
                                          (1, 1, 1), (2, 0, 0), (3, 0, 0), (4, 2, 0), (4, 1, 3)])
def test_sparse_modes(sq, skv, mode, pre, nxt):
    torch.manual_seed(2)
    n, d = 2, 16
    q, k, v = rand(1, n, sq, d, dtype=fp16), rand(1, n, skv, d, dtype=fp16), \
        rand(1, n, skv, d, dtype=fp16)
    user = torch.rand(sq, skv) > 0.8
    if mode in (0, 1):
        mask, vis = user.to(u8), ~user
        if mode == 0:
            vis = vis & _band(sq, skv, -pre, nxt)
    else:
        mask = causal_mask().to(i8)
        shift = skv - sq
        vis = {2: _band(sq, skv, -10**9, 0), 3: _band(sq, skv, -10**9, shift),
               4: _band(sq, skv, shift - pre, shift + nxt)}[mode]
    out, lse = npu.npu_fused_infer_attention_score(
        q, k, v, num_heads=n, input_layout="BNSD", atten_mask=mask, sparse_mode=mode,
        pre_tokens=pre, next_tokens=nxt, softmax_lse_flag=True, scale=0.5)
    ro, rl = attention64(q[0], k[0], v[0], 0.5, visible=vis)
    close(out[0], ro, fp16)
    torch.testing.assert_close(lse[0, :, :, 0].double(), rl, atol=1e-5, rtol=1e-5)
    if not vis.all(1).all():
        assert (~vis).any()  # the case masks something


def test_mode_0_without_mask_ignores_the_band():
    q, k, v = rand(1, 2, 4, 8, dtype=bf16), rand(1, 2, 6, 8, dtype=bf16), rand(1, 2, 6, 8, dtype=bf16)
    a = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD",
                                            pre_tokens=0, next_tokens=0)[0]
    b = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD")[0]
    assert torch.equal(a, b)


@pytest.mark.parametrize("shape", [(3, 5), (1, 3, 5), (2, 3, 5), (2, 1, 3, 5), (1, 1, 4, 8)])
def test_mask_shapes_read_their_corner(shape):
    torch.manual_seed(3)
    q, k, v = rand(2, 2, 3, 8, dtype=fp16), rand(2, 2, 5, 8, dtype=fp16), rand(2, 2, 5, 8, dtype=fp16)
    m = torch.rand(shape) > 0.6
    out = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD",
                                              atten_mask=m, sparse_mode=1)[0]
    for b in range(2):
        mb = m if m.dim() == 2 else m[b if m.shape[0] > 1 else 0]
        mb = mb if mb.dim() == 2 else mb[0]
        ro, _ = attention64(q[b], k[b], v[b], 1.0, visible=~mb[:3, :5])
        close(out[b], ro, fp16)


@pytest.mark.parametrize("shape", [(2, 7), (2, 1, 7), (2, 1, 1, 7), (1, 7)])
def test_decode_reads_the_mask_row_and_ignores_sparse_options(shape):
    torch.manual_seed(4)
    q, k, v = rand(2, 1, 32, dtype=fp16), rand(2, 7, 16, dtype=fp16), rand(2, 7, 16, dtype=fp16)
    m = torch.rand(shape) > 0.5
    m[..., 0] = False
    out = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, num_key_value_heads=1,
                                              atten_mask=m, sparse_mode=0, pre_tokens=0,
                                              next_tokens=0, actual_seq_lengths=[0])[0]
    for b in range(2):
        row = m.reshape(m.shape[0], 7)[b if m.shape[0] > 1 else 0]
        ro, _ = attention64(bnsd(q, "BSH", 2)[b], bnsd(k, "BSH", 1)[b], bnsd(v, "BSH", 1)[b],
                            1.0, visible=~row.unsqueeze(0))
        close(out[b], from_bnsd(ro.unsqueeze(0), "BSH")[0], fp16)


def test_pse_shift_is_added_after_the_scale():
    torch.manual_seed(5)
    q, k, v = rand(2, 2, 3, 8, dtype=bf16), rand(2, 2, 4, 8, dtype=bf16), rand(2, 2, 4, 8, dtype=bf16)
    pse = rand(1, 2, 5, 6, dtype=bf16)  # larger than (Sq, Skv): its corner is read
    out = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD",
                                              pse_shift=pse, scale=0.25)[0]
    for b in range(2):
        ro, _ = attention64(q[b], k[b], v[b], 0.25, pse=pse[0, :, :3, :4])
        close(out[b], ro, bf16)


# ---- sequence lengths ---------------------------------------------------------------------------

def test_lengths_per_batch_zero_the_rows_past_them():
    torch.manual_seed(6)
    q, k, v = rand(3, 2, 5, 8, dtype=fp16), rand(3, 2, 6, 8, dtype=fp16), rand(3, 2, 6, 8, dtype=fp16)
    out, lse = npu.npu_fused_infer_attention_score(
        q, k, v, num_heads=2, input_layout="BNSD", actual_seq_lengths=[5, 2, 0, 9],
        actual_seq_lengths_kv=[6, 3, 4], softmax_lse_flag=True)
    for b, (lq, lk) in enumerate([(5, 6), (2, 3), (0, 4)]):
        ro, rl = attention64(q[b, :, :lq], k[b, :, :lk], v[b, :, :lk], 1.0)
        close(out[b, :, :lq], ro, fp16)
        assert (out[b, :, lq:] == 0).all() and torch.isinf(lse[b, :, lq:]).all()
    one = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD",
                                              actual_seq_lengths_kv=[3])[0]
    for b in range(3):
        close(one[b], attention64(q[b], k[b, :, :3], v[b, :, :3], 1.0)[0], fp16)


def test_kv_length_zero_gives_zeros():
    q, k, v = rand(2, 1, 16, dtype=fp16), rand(2, 4, 16, dtype=fp16), rand(2, 4, 16, dtype=fp16)
    out, lse = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2,
                                                   actual_seq_lengths_kv=[0, 4],
                                                   softmax_lse_flag=True)
    assert (out[0] == 0).all() and torch.isinf(lse[0]).all() and (out[1] != 0).any()


@pytest.mark.parametrize("layout", ["TND", "NTD", "TND_NTD", "NTD_TND"])
def test_t_layouts_are_the_batches_one_by_one(layout):
    torch.manual_seed(7)
    n1, n2, d = 4, 2, 16
    qe, ke = [2, 2, 7, 8], [3, 5, 9, 12]  # batch 1: no query rows; rows past 8: zero
    ql, ol = op_sdk.ops.fused_infer_attention_score.LAYOUTS[layout]
    q, k, v = rand(9, n1, d, dtype=bf16), rand(12, n2, d, dtype=bf16), rand(12, n2, d, dtype=bf16)
    t = (lambda x: x.transpose(0, 1).contiguous()) if ql == "NTD" else (lambda x: x)
    out, lse = npu.npu_fused_infer_attention_score(
        t(q), t(k), t(v), num_heads=n1, num_key_value_heads=n2, input_layout=layout,
        actual_seq_lengths=qe, actual_seq_lengths_kv=ke, sparse_mode=3,
        atten_mask=causal_mask(), softmax_lse_flag=True)
    out_tnd = out if ol == "TND" else out.transpose(0, 1)
    assert lse.shape == (9, n1, 1)
    for (q0, q1), (k0, k1) in zip(zip([0] + qe[:-1], qe), zip([0] + ke[:-1], ke)):
        if q1 == q0:
            continue
        vis = _band(q1 - q0, k1 - k0, -10**9, (k1 - k0) - (q1 - q0))
        ro, rl = attention64(q[q0:q1].transpose(0, 1), k[k0:k1].transpose(0, 1),
                             v[k0:k1].transpose(0, 1), 1.0, visible=vis)
        close(out_tnd[q0:q1].transpose(0, 1), ro, bf16)
        torch.testing.assert_close(lse[q0:q1, :, 0].T.double(), rl, atol=1e-5, rtol=1e-5)
    assert (out_tnd[8:] == 0).all()


# ---- paged caches -----------------------------------------------------------------------------

@pytest.mark.parametrize("form", ["BnBsH", "BnNBsD"])
def test_paged_caches_equal_the_contiguous_call(form):
    torch.manual_seed(8)
    b, n1, n2, d, bs, lens = 3, 4, 2, 16, 16, [20, 5, 33]
    k, v = rand(b, n2, 48, d, dtype=fp16), rand(b, n2, 48, d, dtype=fp16)
    table = torch.tensor([[7, 2, 0], [4, 0, 0], [1, 3, 6]], dtype=i32)
    kc, vc = torch.zeros(8, n2, bs, d, dtype=fp16), torch.zeros(8, n2, bs, d, dtype=fp16)
    for bi in range(b):
        for blk in range(3):
            kc[table[bi, blk]] = k[bi, :, blk * bs:(blk + 1) * bs]
            vc[table[bi, blk]] = v[bi, :, blk * bs:(blk + 1) * bs]
    if form == "BnBsH":
        kc, vc = (c.transpose(1, 2).reshape(8, bs, n2 * d) for c in (kc, vc))
    q = rand(b, n1, 1, d, dtype=fp16)
    paged = npu.npu_fused_infer_attention_score(
        q, kc, vc, num_heads=n1, num_key_value_heads=n2, input_layout="BNSD",
        block_table=table, block_size=bs, actual_seq_lengths_kv=lens)[0]
    plain = npu.npu_fused_infer_attention_score(
        q, k, v, num_heads=n1, num_key_value_heads=n2, input_layout="BNSD",
        actual_seq_lengths_kv=lens)[0]
    assert torch.equal(paged, plain)


def test_paged_block_ids_are_checked():
    q = rand(1, 1, 32, dtype=fp16)
    kc = rand(2, 16, 32, dtype=fp16)
    with pytest.raises(RuntimeError, match=f"{V1}: argument 'block_table'"):
        npu.npu_fused_infer_attention_score(q, kc, kc, num_heads=2,
                                            block_table=torch.tensor([[0, 2]], dtype=i32),
                                            block_size=16, actual_seq_lengths_kv=[20])
    # the blocks past the length are not read
    npu.npu_fused_infer_attention_score(q, kc, kc, num_heads=2,
                                        block_table=torch.tensor([[1, 99]], dtype=i32),
                                        block_size=16, actual_seq_lengths_kv=[16])


# ---- MLA's rope parts and the v2's sink ---------------------------------------------------------

def test_rope_parts_add_to_the_scores():
    torch.manual_seed(9)
    q, k, v = rand(2, 4, 3, 32, dtype=bf16), rand(2, 1, 6, 32, dtype=bf16), rand(2, 1, 6, 32, dtype=bf16)
    qr, kr = rand(2, 4, 3, 8, dtype=bf16), rand(2, 1, 6, 8, dtype=bf16)
    out = npu.npu_fused_infer_attention_score(q, k, v, query_rope=qr, key_rope=kr, num_heads=4,
                                              num_key_value_heads=1, input_layout="BNSD",
                                              scale=0.2)[0]
    cat = npu.npu_fused_infer_attention_score(torch.cat([q, qr], -1), torch.cat([k, kr], -1), v,
                                              num_heads=4, num_key_value_heads=1,
                                              input_layout="BNSD", scale=0.2)[0]
    close(out, cat.double(), bf16)
    for b in range(2):
        close(out[b], attention64(q[b], k[b], v[b], 0.2, qr=qr[b], kr=kr[b])[0], bf16)


def test_learnable_sink_adds_a_logit_per_head():
    torch.manual_seed(10)
    q, k, v = rand(2, 4, 3, 16, dtype=bf16), rand(2, 2, 5, 16, dtype=bf16), rand(2, 2, 5, 16, dtype=bf16)
    sink = rand(4, dtype=bf16) * 3
    out, lse = npu.npu_fused_infer_attention_score_v2(
        q, k, v, num_query_heads=4, num_key_value_heads=2, input_layout="BNSD",
        learnable_sink=sink, softmax_scale=0.5, return_softmax_lse=True)
    for b in range(2):
        ro, rl = attention64(q[b], k[b], v[b], 0.5, sink=sink)
        close(out[b], ro, bf16)
        torch.testing.assert_close(lse[b, :, :, 0].double(), rl, atol=1e-5, rtol=1e-5)


# ---- rows that see nothing, NaN / inf, strides, empty -------------------------------------------

def test_fully_masked_rows_are_zero_with_lse_inf():
    q, k, v = rand(1, 2, 3, 8, dtype=fp16), rand(1, 2, 4, 8, dtype=fp16), rand(1, 2, 4, 8, dtype=fp16)
    m = torch.zeros(3, 4, dtype=boolean)
    m[1] = True
    for ip in (0, 2):
        out, lse = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD",
                                                       atten_mask=m, softmax_lse_flag=True,
                                                       inner_precise=ip)
        assert (out[0, :, 1] == 0).all() and torch.isinf(lse[0, :, 1]).all()
        assert torch.isfinite(out).all()


def test_nan_and_inf_propagate_to_their_rows():
    q, k, v = rand(1, 2, 3, 8, dtype=fp16), rand(1, 2, 4, 8, dtype=fp16), rand(1, 2, 4, 8, dtype=fp16)
    q[0, 0, 1, 0] = float("nan")
    v[0, 1, 2, 3] = float("inf")
    out = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2, input_layout="BNSD")[0]
    assert torch.isnan(out[0, 0, 1]).all() and torch.isfinite(out[0, 0, [0, 2]]).all()
    assert not torch.isfinite(out[0, 1, :, 3]).any() and torch.isfinite(out[0, 1, :, :3]).all()


def test_strided_and_broadcast_inputs_equal_contiguous():
    torch.manual_seed(11)
    q, k, v = rand(2, 4, 16 * 2, dtype=fp16), rand(2, 6, 16 * 2, dtype=fp16), \
        rand(2, 6, 16 * 2, dtype=fp16)
    want = npu.npu_fused_infer_attention_score(q, k, v, num_heads=2)[0]
    got = npu.npu_fused_infer_attention_score(strided(q), strided(k), strided(v), num_heads=2)[0]
    assert torch.equal(want, got)
    kb = k[:1].expand(2, 6, 32)  # stride-0 batch
    want = npu.npu_fused_infer_attention_score(q, kb.contiguous(), v, num_heads=2)[0]
    assert torch.equal(npu.npu_fused_infer_attention_score(q, kb, v, num_heads=2)[0], want)


def test_empty_inputs():
    out, lse = npu.npu_fused_infer_attention_score(
        rand(0, 3, 32, dtype=fp16), rand(0, 5, 32, dtype=fp16), rand(0, 5, 32, dtype=fp16),
        num_heads=2, softmax_lse_flag=True)
    assert out.shape == (0, 3, 32) and lse.shape == (0, 2, 3, 1)
    out = npu.npu_fused_infer_attention_score(rand(2, 3, 32, dtype=fp16),
                                              rand(2, 0, 32, dtype=fp16),
                                              rand(2, 0, 32, dtype=fp16), num_heads=2)[0]
    assert out.shape == (2, 3, 32) and (out == 0).all()


def test_query_rows_in_steps_equal_one_step(monkeypatch):
    """The reference takes long query blocks a few rows at a time (its scores in cache):
    the same rows' arithmetic."""
    from op_sdk.ops import fused_infer_attention_score as fia

    torch.manual_seed(13)
    q, k, v = rand(2, 4, 37, 16, dtype=bf16), rand(2, 2, 29, 16, dtype=bf16), \
        rand(2, 2, 29, 16, dtype=bf16)
    kw = {"num_heads": 4, "num_key_value_heads": 2, "input_layout": "BNSD", "sparse_mode": 3,
          "atten_mask": causal_mask(), "pse_shift": rand(2, 4, 37, 29, dtype=bf16),
          "softmax_lse_flag": True}
    whole = npu.npu_fused_infer_attention_score(q, k, v, **kw)
    monkeypatch.setattr(fia, "_SCORES_PER_STEP", 4 * 29 * 5)  # 5 rows a step
    steps = npu.npu_fused_infer_attention_score(q, k, v, **kw)
    torch.testing.assert_close(steps[0], whole[0], atol=0, rtol=2 ** -7)
    torch.testing.assert_close(steps[1], whole[1], atol=1e-6, rtol=1e-6)


def test_head_dims_of_zero_give_the_meta_shapes():
    q, k = rand(2, 3, 4, 8, dtype=fp16), rand(2, 3, 5, 8, dtype=fp16)
    out, lse = npu.npu_fused_infer_attention_score(q, k, rand(2, 3, 5, 0, dtype=fp16),
                                                   num_heads=3, input_layout="BNSD",
                                                   softmax_lse_flag=True)
    assert out.shape == (2, 3, 4, 8) and (out == 0).all() and torch.isfinite(lse).all()
    out = npu.npu_fused_infer_attention_score(rand(2, 4, 0, dtype=fp16), rand(2, 5, 0, dtype=fp16),
                                              rand(2, 5, 6, dtype=fp16), num_heads=2)[0]
    assert out.shape == (2, 4, 0)


# ---- the value checks -------------------------------------------------------------------------

@pytest.mark.parametrize("name,kw,arg", [
    (V1, {"actual_seq_lengths": [4, 2]}, "actual_seq_lengths"),
    (V1, {"actual_seq_lengths_kv": [-1]}, "actual_seq_lengths_kv"),
    (V2, {"actual_seq_kvlen": [9, 1]}, "actual_seq_kvlen"),
    (A1, {"actual_seq_lengths": torch.tensor([4, 2])}, "actual_seq_lengths"),
])
def test_lengths_out_of_range_are_refused(name, kw, arg):
    q, k, v = rand(2, 3, 32, dtype=fp16), rand(2, 5, 32, dtype=fp16), rand(2, 5, 32, dtype=fp16)
    heads = {"num_query_heads": 2} if name in (V2, A2) else {"num_heads": 2}
    fn = getattr(npu, name) if "::" not in name else getattr(air, name.split("::")[1])
    with pytest.raises(RuntimeError, match=f"argument '{arg}'"):
        fn(q, k, v, **heads, **kw)


def test_cumulative_lengths_must_not_decrease():
    q = rand(6, 2, 16, dtype=bf16)
    with pytest.raises(RuntimeError, match="argument 'actual_seq_lengths'"):
        npu.npu_fused_infer_attention_score(q, q, q, num_heads=2, input_layout="TND",
                                            actual_seq_lengths=[4, 3],
                                            actual_seq_lengths_kv=[3, 6])


def test_causal_modes_take_only_the_upper_triangular_mask():
    q = rand(1, 2, 4, 8, dtype=fp16)
    bad = causal_mask()
    bad[5, 2] = True
    with pytest.raises(RuntimeError, match=f"{V1}: argument 'atten_mask'"):
        npu.npu_fused_infer_attention_score(q, q, q, num_heads=2, input_layout="BNSD",
                                            sparse_mode=3, atten_mask=bad)


# ---- the four forms ---------------------------------------------------------------------------

def test_v2_and_torchair_forms_equal_v1():
    torch.manual_seed(12)
    q, k, v = rand(2, 4, 64, dtype=bf16), rand(2, 6, 32, dtype=bf16), rand(2, 6, 32, dtype=bf16)
    kw = {"num_key_value_heads": 2, "pre_tokens": 2, "next_tokens": 0,
          "atten_mask": torch.rand(4, 6) > 0.9, "input_layout": "BSH"}
    one = npu.npu_fused_infer_attention_score(q, k, v, num_heads=4, scale=0.4,
                                              actual_seq_lengths=[4, 3],
                                              actual_seq_lengths_kv=[6, 5],
                                              softmax_lse_flag=True, **kw)
    two = npu.npu_fused_infer_attention_score_v2(q, k, v, num_query_heads=4, softmax_scale=0.4,
                                                 actual_seq_qlen=[4, 3], actual_seq_kvlen=[6, 5],
                                                 return_softmax_lse=True, **kw)
    a1 = op_sdk.ops.npu_fused_infer_attention_score(
        q, k, v, num_heads=4, scale=0.4, actual_seq_lengths=torch.tensor([4, 3]),
        actual_seq_lengths_kv=torch.tensor([6, 5]), softmax_lse_flag=True, **kw)
    a2 = op_sdk.ops.npu_fused_infer_attention_score_v2(
        q, k, v, num_query_heads=4, softmax_scale=0.4, actual_seq_qlen=torch.tensor([4, 3]),
        actual_seq_kvlen=torch.tensor([6, 5]), return_softmax_lse=True, **kw)
    for other in (two, a1, a2):
        assert all(torch.equal(x, y) for x, y in zip(one, other))


@pytest.mark.parametrize("mode", ["max-autotune", "reduce-overhead"])
def test_one_call_under_torch_compile_with_dynamic_shapes(mode):
    from op_sdk import CompilerConfig, get_npu_backend

    def f(q, k, v):
        out, _ = torch.ops.npu.npu_fused_infer_attention_score(
            q, k, v, num_heads=4, num_key_value_heads=2, input_layout="BSH", scale=0.25)
        return out * 2

    cfg = CompilerConfig()
    cfg.mode = mode
    compiled = torch.compile(f, backend=get_npu_backend(compiler_config=cfg), dynamic=True)
    for s in (3, 5):
        q, k, v = rand(2, s, 64, dtype=fp16), rand(2, s + 2, 32, dtype=fp16), \
            rand(2, s + 2, 32, dtype=fp16)
        assert torch.equal(compiled(q, k, v), f(q, k, v))
