"""npu_fused_infer_attention_score and its v2: the inference attention of the Ascend stack,
prefill (PromptFlashAttention) and decode (IncreFlashAttention) in one operator
(torch_npu.npu_fused_infer_attention_score / _v2; CANN's FusedInferAttentionScore,
aclnnFusedInferAttentionScoreV4 / V5), in torch_npu's schemas (``npu::``) and in TorchAir's
(``air::``, torchair.ops.npu_fused_infer_attention_score / _v2, whose sequence lengths are
tensors).

Contract (docs/operators.md, "Attention"), read from torch_npu's document of the operator,
its Meta functions (op_plugin/meta/_meta_registrations.py) and TorchAir's
(torchair/ops/_npu_fused_infer_attention_score*.py):

* ``attention_out = softmax(scale * (query @ key^T) + pse_shift, masked) @ value`` per
  batch and query head, in float32, rounded once to query's dtype; query head h reads key /
  value head ``h // (num_heads / num_key_value_heads)`` (GQA). With MLA's ``query_rope`` /
  ``key_rope`` the scores are ``query @ key^T + query_rope @ key_rope^T`` before the scale.
* ``input_layout`` names query's layout and the output's (``LAYOUTS``); key / value share
  query's, or are paged (``block_table``: (blocks, block_size, H) or (blocks, N, block_size,
  D) caches, each batch's rows in the blocks its row of block_table lists).
* Sequence lengths: ``actual_seq_lengths`` / ``actual_seq_lengths_kv`` per batch (one value:
  every batch), cumulative in the T layouts (TND / NTD), the kv ones per batch in a paged
  call; rows past a batch's query length, and rows that see no key, are 0 (torch_npu's
  "row invalid" correction, inner_precise 2 / 3, which op_sdk always applies), their lse
  +inf. A query length of 1 (decode) ignores actual_seq_lengths, sparse_mode, pre_tokens and
  next_tokens.
* Masks: ``atten_mask`` (bool / int8 / uint8, nonzero = not computed) in sparse_mode 0 / 1
  at least (Sq, Skv), read from its top-left corner; sparse_mode 0 adds the band
  ``-pre_tokens <= j - i <= next_tokens`` when a mask is given; 2 / 3 / 4 take the
  2048 x 2048 upper-triangular mask and compute causal from the top left (2), causal from the
  bottom right (3), the band about the bottom-right diagonal (4).
* ``softmax_lse`` (float32, natural log of the sum of exp of the masked, scaled scores):
  (B, N, Sq, 1), (T, N, 1) in the T layouts; without the flag an empty (0,) tensor
  (torch_npu's Meta).
* Not computed (errors naming the argument): the quantised forms (int8 / int4 query, key or
  value; every quant / antiquant / dequant scale and offset), left padding (the padding
  sizes), the shared prefix, FRACTAL_NZ paged caches, sparse_mode 9 (tree masks).
"""

from __future__ import annotations

import functools

import torch
from torch.utils._python_dispatch import _get_current_dispatch_mode

from op_sdk.library import define_op
from op_sdk.ops._common import CODE_OF, check, dtype_value_str, fail
from op_sdk.triton_kernels import TritonKernel

OP = "npu_fused_infer_attention_score"
OP_V2 = "npu_fused_infer_attention_score_v2"
DTYPES = (torch.float16, torch.bfloat16)
MASK_DTYPES = (torch.bool, torch.int8, torch.uint8)
INT_MAX = 2147483647
# the mask sparse_modes 2 / 3 / 4 take: 2048 x 2048, 1 above the diagonal
CAUSAL_MASK_SIZE = 2048
# input_layout -> (query's layout, attention_out's layout) (torch_npu's Meta LAYOUT_MAP)
LAYOUTS = {
    "BSH": ("BSH", "BSH"), "BSND": ("BSND", "BSND"), "BNSD": ("BNSD", "BNSD"),
    "TND": ("TND", "TND"), "NTD": ("NTD", "NTD"), "NSD": ("NSD", "NSD"),
    "BNSD_BSND": ("BNSD", "BSND"), "BSH_BNSD": ("BSH", "BNSD"), "BSND_BNSD": ("BSND", "BNSD"),
    "NTD_TND": ("NTD", "TND"), "BSH_NBSD": ("BSH", "NBSD"), "BSND_NBSD": ("BSND", "NBSD"),
    "BNSD_NBSD": ("BNSD", "NBSD"), "TND_NTD": ("TND", "NTD"),
}
RANK = {"BSH": 3, "BSND": 4, "BNSD": 4, "TND": 3, "NTD": 3, "NSD": 3}
T_LAYOUTS = ("TND", "NTD")
SPARSE_MODES = (0, 1, 2, 3, 4)

# the arguments of the quantised, left-padded and shared-prefix forms, which op_sdk does not
# compute: name -> why (each must be None)
_QUANT = "quantised attention is not implemented by op_sdk"
UNSUPPORTED_V1 = {
    **{n: _QUANT for n in ("dequant_scale1", "quant_scale1", "dequant_scale2", "quant_scale2",
                           "quant_offset2", "antiquant_scale", "antiquant_offset",
                           "key_antiquant_scale", "key_antiquant_offset",
                           "value_antiquant_scale", "value_antiquant_offset",
                           "key_rope_antiquant_scale")},
    **{n: "left padding is not implemented by op_sdk"
       for n in ("query_padding_size", "kv_padding_size")},
    **{n: "the shared prefix is not implemented by op_sdk"
       for n in ("key_shared_prefix", "value_shared_prefix", "actual_shared_prefix_len")},
}
UNSUPPORTED_V2 = {n: _QUANT for n in (
    "dequant_scale_query", "dequant_scale_key", "dequant_offset_key", "dequant_scale_value",
    "dequant_offset_value", "dequant_scale_key_rope", "quant_scale_out", "quant_offset_out",
    "quant_scale_p")}


class Call:
    """One call in the common form of all four operators: the tensors, the lengths as
    Python lists (or None; Tensors in TorchAir's form until the reference reads them) and
    the options, and after ``check`` the sizes it reads."""

    def __init__(self, op, query, key, value, *, pse_shift, atten_mask, q_lens, kv_lens,
                 block_table, query_rope, key_rope, learnable_sink, num_heads,
                 num_key_value_heads, scale, pre_tokens, next_tokens, input_layout,
                 sparse_mode, inner_precise, block_size, lse_flag):
        self.op, self.query, self.key, self.value = op, query, key, value
        self.pse_shift, self.atten_mask = pse_shift, atten_mask
        self.q_lens, self.kv_lens, self.block_table = q_lens, kv_lens, block_table
        self.query_rope, self.key_rope, self.learnable_sink = query_rope, key_rope, learnable_sink
        self.num_heads, self.num_key_value_heads = num_heads, num_key_value_heads
        self.scale, self.pre_tokens, self.next_tokens = scale, pre_tokens, next_tokens
        self.input_layout, self.sparse_mode = input_layout, sparse_mode
        self.inner_precise, self.block_size, self.lse_flag = inner_precise, block_size, lse_flag


def _sizes(t, layout, heads):
    """(B, S, N, D) of a tensor in a B layout (NSD: B = 1), (T, N, D) in a T layout."""
    if layout == "BSH":
        return t.shape[0], t.shape[1], heads, t.shape[2] // heads
    if layout == "BSND":
        return tuple(t.shape)
    if layout == "BNSD":
        return t.shape[0], t.shape[2], t.shape[1], t.shape[3]
    if layout == "NSD":
        return 1, t.shape[1], t.shape[0], t.shape[2]
    if layout == "TND":
        return tuple(t.shape)
    return t.shape[1], t.shape[0], t.shape[2]  # NTD


def _to_bnsd(t, layout, heads):
    """A B-layout tensor as (B, N, S, D), a T-layout one as (N, T, D) (views)."""
    if layout == "BSH":
        b, s, h = t.shape
        return t.reshape(b, s, heads, h // heads).transpose(1, 2)
    if layout == "BSND":
        return t.transpose(1, 2)
    if layout == "BNSD":
        return t
    if layout == "NSD":
        return t.unsqueeze(0)
    if layout == "TND":
        return t.transpose(0, 1)
    return t  # NTD


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_call(c: Call) -> dict:
    """The contract's rules that shapes, dtypes and options decide (the reference also
    checks the values: lengths, block ids, the causal masks), shared by reference and fake;
    returns the sizes the call reads."""
    op = c.op
    q, k, v = c.query, c.key, c.value
    check(c.input_layout in LAYOUTS, op, "input_layout",
          f"must be one of {', '.join(LAYOUTS)}, got {c.input_layout!r}")
    q_layout, out_layout = LAYOUTS[c.input_layout]
    check(q.dtype in DTYPES, op, "query",
          f"must have dtype float16 or bfloat16 (int8 query: {_QUANT}), got {q.dtype}")
    check(q.dim() == RANK[q_layout], op, "query",
          f"must have {RANK[q_layout]} dims in layout {c.input_layout}, got {q.dim()}")
    for name, t in (("key", k), ("value", v)):
        check(t.dtype == q.dtype, op, name,
              f"must have query's dtype {q.dtype} (int8 / int4 {name}: {_QUANT}), got {t.dtype}")
    check(_is_int(c.num_heads) and c.num_heads > 0, op, "num_heads",
          f"must be greater than 0, got {c.num_heads}")
    n1 = c.num_heads
    n2 = n1 if c.num_key_value_heads == 0 else c.num_key_value_heads
    check(n2 > 0 and n1 % n2 == 0 and n1 // n2 <= 64, op, "num_key_value_heads",
          f"must be 0 or a divisor of num_heads {n1} with num_heads / num_key_value_heads "
          f"<= 64, got {c.num_key_value_heads}")
    if q_layout == "BSH":
        check(q.shape[2] % n1 == 0, op, "query",
              f"must have a hidden size {q.shape[2]} that is a multiple of num_heads {n1}")
    else:
        qn = _sizes(q, q_layout, n1)[-2]
        check(qn == n1, op, "num_heads",
              f"must equal query's head count {qn} in layout {q_layout}, got {n1}")
    t_layout = q_layout in T_LAYOUTS
    if t_layout:
        _, _, dq = _sizes(q, q_layout, n1)
        sq = None
    else:
        b, sq, _, dq = _sizes(q, q_layout, n1)
    check(c.sparse_mode in SPARSE_MODES, op, "sparse_mode",
          f"must be one of 0, 1, 2, 3, 4 (9, tree masks, is not implemented by op_sdk), got "
          f"{c.sparse_mode}")
    check(c.inner_precise in (0, 1, 2, 3), op, "inner_precise",
          f"must be 0, 1, 2 or 3, got {c.inner_precise}")
    paged = c.block_table is not None
    if paged:
        bt = c.block_table
        check(bt.dtype == torch.int32 and bt.dim() == 2, op, "block_table",
              f"must be a 2-D int32 tensor (B, max blocks), got {list(bt.shape)} {bt.dtype}")
        check(k.dim() in (3, 4) and v.dim() == k.dim(), op, "key",
              f"must be a paged cache (blocks, block_size, H) or (blocks, N, block_size, D) "
              f"with value's rank (FRACTAL_NZ caches are not implemented by op_sdk), got "
              f"{list(k.shape)} and value {list(v.shape)}")
        if k.dim() == 4:
            check(q_layout in ("BNSD", "TND"), op, "key",
                  f"must be a (blocks, block_size, H) cache with a {q_layout} query, got "
                  f"{list(k.shape)}")
        bs = k.shape[1] if k.dim() == 3 else k.shape[2]
        check(c.block_size == bs and bs > 0, op, "block_size",
              f"must equal the caches' block size {bs}, got {c.block_size}")
        check(c.kv_lens is not None, op, _len_name(c, "kv"),
              "must be given with block_table (page attention)")
        kshape = (k.shape[0], bs) + ((k.shape[2] // n2,) if k.dim() == 3 else (k.shape[3],))
        check(k.shape[0] == v.shape[0] and (k.dim() == 3 or (k.shape[1] == n2 and v.shape[1] == n2
                                                           and v.shape[2] == bs)),
              op, "value", f"must be a cache of key's blocks, heads and block size, got "
              f"{list(v.shape)} (key {list(k.shape)})")
        if k.dim() == 3:
            check(k.shape[2] % n2 == 0 and v.shape[2] % n2 == 0 and v.shape[1] == bs, op, "key",
                  f"must have a hidden size that is a multiple of num_key_value_heads {n2}, got "
                  f"key {list(k.shape)}, value {list(v.shape)}")
        dk = kshape[2]
        dv = v.shape[2] // n2 if v.dim() == 3 else v.shape[3]
        skv = bt.shape[1] * bs
        if not t_layout:
            check(bt.shape[0] == b, op, "block_table",
                  f"must have query's batch {b} rows, got {bt.shape[0]}")
    else:
        for name, t in (("key", k), ("value", v)):
            check(t.dim() == q.dim(), op, name,
                  f"must have query's rank {q.dim()} in layout {q_layout} (without block_table), "
                  f"got {list(t.shape)}")
            if q_layout == "BSH":
                check(t.shape[2] % n2 == 0, op, name,
                      f"must have a hidden size that is a multiple of num_key_value_heads {n2}, "
                      f"got {t.shape[2]}")
        ks, vs = _sizes(k, q_layout, n2), _sizes(v, q_layout, n2)
        check(ks[-2] == n2 and vs[-2] == n2, op, "num_key_value_heads",
              f"must equal key's and value's head count in layout {q_layout}, got {n2} (key "
              f"{list(k.shape)}, value {list(v.shape)})")
        check(ks[:-1] == vs[:-1], op, "value",
              f"must have key's batch, sequence and heads, got {list(v.shape)} (key "
              f"{list(k.shape)})")
        dk, dv = ks[-1], vs[-1]
        if not t_layout:
            check(ks[0] == b, op, "key", f"must have query's batch {b}, got {ks[0]}")
            skv = ks[1]
        else:
            skv = None
    check(dk == dq, op, "key", f"must have query's head dim {dq}, got {dk}")
    if (c.query_rope is None) != (c.key_rope is None):
        fail(op, "query_rope" if c.query_rope is None else "key_rope",
             "must be given together with key_rope / query_rope (MLA)")
    dr = 0
    if c.query_rope is not None:
        qr, kr = c.query_rope, c.key_rope
        check(qr.dtype == q.dtype and qr.dim() == q.dim(), op, "query_rope",
              f"must have query's dtype {q.dtype} and rank {q.dim()}, got {qr.dtype} "
              f"{list(qr.shape)}")
        check(kr.dtype == k.dtype and kr.dim() == k.dim(), op, "key_rope",
              f"must have key's dtype {k.dtype} and rank {k.dim()}, got {kr.dtype} "
              f"{list(kr.shape)}")
        if q_layout == "BSH":
            check(qr.shape[:2] == q.shape[:2] and qr.shape[2] % n1 == 0, op, "query_rope",
                  f"must have query's batch and sequence and a multiple of num_heads {n1} as "
                  f"hidden size, got {list(qr.shape)}")
            dr = qr.shape[2] // n1
        else:
            qs = _sizes(qr, q_layout, n1)
            check(qs[:-1] == _sizes(q, q_layout, n1)[:-1], op, "query_rope",
                  f"must have query's sizes but the head dim, got {list(qr.shape)} (query "
                  f"{list(q.shape)})")
            dr = qs[-1]
        if paged:
            krs = (kr.shape[0], kr.shape[1], kr.shape[2] // n2) if kr.dim() == 3 else \
                (kr.shape[0], kr.shape[2], kr.shape[3])
            ok = krs[:2] == (k.shape[0], kshape[1]) and (kr.dim() == 3 or kr.shape[1] == n2)
        else:
            krs = _sizes(kr, q_layout, n2)
            ok = krs[:-1] == _sizes(k, q_layout, n2)[:-1]
        check(ok and krs[-1] == dr and (kr.dim() == 4 or kr.shape[-1] == n2 * dr), op,
              "key_rope", f"must have key's sizes with query_rope's head dim {dr}, got "
              f"{list(kr.shape)} (key {list(k.shape)})")
    # the lengths' counts (their values: the reference); TorchAir's forms take tensors
    for which, lens in (("q", c.q_lens), ("kv", c.kv_lens)):
        if isinstance(lens, torch.Tensor):
            check(lens.dim() == 1 and lens.dtype in (torch.int64, torch.int32), op,
                  _len_name(c, which), f"must be a 1-D int64 (or int32) tensor, got "
                  f"{list(lens.shape)} {lens.dtype}")
    if t_layout:
        check(c.q_lens is not None, op, _len_name(c, "q"),
              f"must be given in layout {q_layout} (the cumulative query lengths)")
        b = _count(c.q_lens)
        if not paged:
            check(c.kv_lens is not None, op, _len_name(c, "kv"),
                  f"must be given in layout {q_layout} (the cumulative key / value lengths)")
            check(_count(c.kv_lens) == b, op, _len_name(c, "kv"),
                  f"must hold one length per batch ({b}), got {_count(c.kv_lens)}")
        else:
            check(c.block_table.shape[0] == b, op, "block_table",
                  f"must have a row per batch ({b}), got {c.block_table.shape[0]}")
    else:
        for which, lens in (("q", c.q_lens), ("kv", c.kv_lens)):
            if lens is not None and not (which == "q" and sq == 1):
                n = _count(lens)
                check(n == 1 or n >= b, op, _len_name(c, which),
                      f"must hold 1 length or at least one per batch ({b}), got {n}")
    if c.pse_shift is not None:
        p = c.pse_shift
        check(not t_layout, op, "pse_shift", f"must be None in layout {q_layout}")
        check(p.dtype == q.dtype and p.dim() == 4 and p.shape[0] in (1, b) and p.shape[1] == n1
              and p.shape[2] >= sq and p.shape[3] >= skv, op, "pse_shift",
              f"must be ({b} or 1, {n1}, >= {sq}, >= {skv}) of query's dtype {q.dtype}, got "
              f"{list(p.shape)} {p.dtype}")
    m = c.atten_mask
    if c.sparse_mode in (2, 3, 4) and not (sq == 1 and c.query_rope is None):
        s = CAUSAL_MASK_SIZE
        check(m is not None and m.dtype in MASK_DTYPES and tuple(m.shape) in
              ((s, s), (1, s, s), (1, 1, s, s)), op, "atten_mask",
              f"must be the ({s}, {s}) (or (1, {s}, {s}), (1, 1, {s}, {s})) bool / int8 / uint8 "
              f"upper-triangular mask in sparse_mode {c.sparse_mode}, got "
              f"{None if m is None else [list(m.shape), m.dtype]}")
    elif m is not None:
        check(m.dtype in MASK_DTYPES, op, "atten_mask",
              f"must have dtype bool, int8 or uint8, got {m.dtype}")
        if t_layout:
            fail(op, "atten_mask", f"must be None in layout {q_layout} unless sparse_mode is "
                 "2, 3 or 4")
        ok = (m.dim() == 2 and (m.shape[0] in (1, b) if sq == 1 else m.shape[0] >= sq)) or \
            (m.dim() == 3 and m.shape[0] in (1, b) and m.shape[1] >= sq) or \
            (m.dim() == 4 and m.shape[0] in (1, b) and m.shape[1] == 1 and m.shape[2] >= sq)
        check(ok and m.shape[-1] >= skv, op, "atten_mask",
              f"must be (>= {sq}, >= {skv}), ({b} or 1, >= {sq}, >= {skv}) or ({b} or 1, 1, "
              f">= {sq}, >= {skv})" + (f" or ({b} or 1, >= {skv})" if sq == 1 else "") +
              f", got {list(m.shape)}")
    elif c.sparse_mode == 1 and not (sq == 1 and c.query_rope is None):
        fail(op, "atten_mask", "must be given in sparse_mode 1 (allMask)")
    if c.learnable_sink is not None:
        s_ = c.learnable_sink
        check(s_.dtype in (q.dtype, torch.float32) and tuple(s_.shape) == (n1,), op,
              "learnable_sink", f"must be ({n1},) of query's dtype or float32, got "
              f"{list(s_.shape)} {s_.dtype}")
    return {"q_layout": q_layout, "out_layout": out_layout, "b": b, "sq": sq, "skv": skv,
            "n1": n1, "n2": n2, "dq": dq, "dv": dv, "dr": dr, "paged": paged,
            "t_layout": t_layout}


def _len_name(c: Call, which: str) -> str:
    if c.op.endswith("_v2"):
        return "actual_seq_qlen" if which == "q" else "actual_seq_kvlen"
    return "actual_seq_lengths" if which == "q" else "actual_seq_lengths_kv"


def _count(lens) -> int:
    return lens.numel() if isinstance(lens, torch.Tensor) else len(lens)


def output_shapes(c: Call, f: dict):
    """attention_out's and softmax_lse's shapes (torch_npu's Meta functions)."""
    q = c.query
    n1 = f["n1"]
    dv = f["dv"]
    out_d = f["dq"] if dv == 0 or f["dq"] == 0 else dv
    lay = f["out_layout"]
    if f["t_layout"]:
        t = _sizes(q, f["q_layout"], n1)[0]
        out = (t, n1, out_d) if lay == "TND" else (n1, t, out_d)
        return out, (t, n1, 1)
    b, s = _sizes(q, f["q_layout"], n1)[:2]
    if lay == "BSH":
        h = n1 * dv
        out = (b, s, q.shape[2] if h == 0 or q.shape[2] == 0 else h)
    elif lay == "BSND":
        out = (b, s, n1, out_d)
    elif lay == "BNSD":
        out = (b, n1, s, out_d)
    elif lay == "NBSD":
        out = (n1, b, s, out_d)
    else:  # NSD
        out = (n1, s, out_d)
    return out, (b, n1, s, 1)


def _fake(c: Call):
    f = check_call(c)
    out, lse = output_shapes(c, f)
    return (c.query.new_empty(out),
            c.query.new_empty(lse if c.lse_flag else (0,), dtype=torch.float32))


# ---- the values' rules and the arithmetic (the reference) ---------------------------------

def _ints(lens) -> list[int]:
    return [int(x) for x in (lens.tolist() if isinstance(lens, torch.Tensor) else lens)]


def _per_batch(c: Call, which: str, lens, b: int, full: int) -> list[int]:
    """Each batch's length from a non-cumulative list (one value: every batch)."""
    vals = _ints(lens)
    vals = vals * b if len(vals) == 1 else vals[:b]
    for i, x in enumerate(vals):
        check(0 <= x <= full, c.op, _len_name(c, which),
              f"must hold lengths in [0, {full}], got {x} for batch {i}")
    return vals


def _cumulative(c: Call, which: str, lens, total: int) -> tuple[list[int], list[int]]:
    """Each batch's start row and length from cumulative lengths (the T layouts)."""
    ends = _ints(lens)
    starts = [0] + ends[:-1]
    for i, (s, e) in enumerate(zip(starts, ends)):
        check(s <= e <= total, c.op, _len_name(c, which),
              f"must be non-decreasing cumulative lengths in [0, {total}], got {e} at {i}")
    return starts, [e - s for s, e in zip(starts, ends)]


def _causal_mask(device: torch.device) -> torch.Tensor:
    """The mask sparse_modes 2 / 3 / 4 require, made once per device (only read); under a
    dispatch mode (a trace) made afresh, not kept (as ops/rotary_mul.py's rotation)."""
    if _get_current_dispatch_mode() is not None:
        return _make_causal_mask(device)
    return _cached_causal_mask(device)


def _make_causal_mask(device) -> torch.Tensor:
    return torch.ones(CAUSAL_MASK_SIZE, CAUSAL_MASK_SIZE, dtype=torch.bool,
                      device=device).triu_(1)


_cached_causal_mask = functools.lru_cache(maxsize=None)(_make_causal_mask)


def _check_causal_mask(c: Call) -> None:
    m = c.atten_mask.reshape(CAUSAL_MASK_SIZE, CAUSAL_MASK_SIZE) != 0
    check(bool(torch.equal(m, _causal_mask(m.device))), c.op, "atten_mask",
          f"must be 1 above the diagonal and 0 elsewhere in sparse_mode {c.sparse_mode} (the "
          "mode computes the mask; torch_npu requires this one)")


def _mask_rows(c: Call, f: dict, b: int, sq_b: int, skv_b: int) -> torch.Tensor:
    """Batch b's (sq_b, skv_b) corner of atten_mask (a decode call's (B, Skv) mask: its
    row b)."""
    m = c.atten_mask
    pick = b if m.shape[0] > 1 else 0
    if m.dim() == 2:
        return m[pick, :skv_b].unsqueeze(0) if f["sq"] == 1 else m[:sq_b, :skv_b]
    if m.dim() == 3:
        return m[pick, :sq_b, :skv_b]
    return m[pick, 0, :sq_b, :skv_b]


def _band(c: Call, f: dict):
    """How a call masks, by sparse_mode: (the user mask applies, the band (lo, hi) of
    ``j - i`` (minus Skv - Sq with ``shift``) or None, shift). 0: the mask and, with one,
    -pre_tokens ... next_tokens from the top left; 1: the mask; 2: causal from the top left;
    3: causal from the bottom right; 4: -pre_tokens ... next_tokens from the bottom right. A
    decode call (query length 1, no rope) takes the mask alone."""
    if f["sq"] == 1 and c.query_rope is None:
        return c.atten_mask is not None, None, False
    unbounded = 1 << 62
    mode = c.sparse_mode
    if mode == 0:
        if c.atten_mask is None:
            return False, None, False
        return True, (-c.pre_tokens, c.next_tokens), False
    if mode == 1:
        return True, None, False
    if mode == 2:
        return False, (-unbounded, 0), False
    if mode == 3:
        return False, (-unbounded, 0), True
    return False, (-c.pre_tokens, c.next_tokens), True


def _visible(c: Call, f: dict, b: int, sq_b: int, skv_b: int, device) -> torch.Tensor | None:
    """(sq_b, skv_b) bool, True where query row i sees key j (None: every key): the user
    mask and the band of ``_band``, the CUDA kernel's too."""
    use_mask, band, shift = _band(c, f)
    vis = _mask_rows(c, f, b, sq_b, skv_b) == 0 if use_mask else None
    if band is not None:
        i = torch.arange(sq_b, device=device).unsqueeze(1)
        j = torch.arange(skv_b, device=device).unsqueeze(0)
        d = j - i - (skv_b - sq_b if shift else 0)
        in_band = (d >= band[0]) & (d <= band[1])
        vis = in_band if vis is None else vis & in_band
    return vis


def _grouped(x, n2: int):
    """(N1, S, D) -> (N2, G * S, D): query head h = kv head * G + g, the G query heads of a
    key / value head stacked, so that one batched product per kv head serves them (no
    copy of the keys per query head)."""
    n1, sq, d = x.shape
    return x.reshape(n2, (n1 // n2) * sq, d)


# query rows per step of the reference: their float32 scores over all heads stay near this
# many elements (a few MiB, in cache), whatever the sequence lengths
_SCORES_PER_STEP = 1 << 20


def _attend(c: Call, f: dict, q, k, v, qr, kr, pse, vis):
    """One batch: q (N1, Sq, D), k (N2, Skv, D), v (N2, Skv, Dv), qr / kr their rope parts,
    pse (N1, Sq, Skv) or None, vis (Sq, Skv) or None -> out (N1, Sq, Dv), lse (N1, Sq) in
    float32, a step of query rows at a time (each row's arithmetic is the same)."""
    step = max(1, _SCORES_PER_STEP // max(1, f["n1"] * k.shape[1]))
    kf, vf = k.float(), v.float()
    krf = None if kr is None else kr.float()
    if q.shape[1] <= step:
        return _attend_rows(c, f, q, kf, vf, v.dtype, qr, krf, pse, vis)
    outs, lses = [], []
    for i in range(0, q.shape[1], step):
        rows = slice(i, i + step)
        o, ls = _attend_rows(c, f, q[:, rows], kf, vf, v.dtype,
                             None if qr is None else qr[:, rows], krf,
                             None if pse is None else pse[:, rows],
                             None if vis is None else vis[rows])
        outs.append(o)
        lses.append(ls)
    return torch.cat(outs, 1), torch.cat(lses, 1)


def _attend_rows(c: Call, f: dict, q, k, v, v_dtype, qr, kr, pse, vis):
    """``_attend`` of some query rows, k / v / kr in float32. The probabilities are float32,
    rounded to value's dtype for the product with value (float32 accumulation), as
    op-plugin's golden and the NPU's kernels do; a row that sees no key gives 0 and lse
    +inf."""
    n1, n2, sq = f["n1"], f["n2"], q.shape[1]
    s = _grouped(q.float(), n2) @ k.transpose(1, 2)
    if qr is not None:
        s = s + _grouped(qr.float(), n2) @ kr.transpose(1, 2)
    s = s.reshape(n1, sq, -1) * c.scale
    if pse is not None:
        s = s + pse.float()
    if vis is not None:
        s = s.masked_fill(~vis, float("-inf"))
    if c.learnable_sink is not None:  # one more logit per head (not scaled), of no value
        sink = c.learnable_sink.float().reshape(-1, 1, 1).expand(n1, sq, 1)
        s = torch.cat([s, sink], dim=-1)
    seen = (s != float("-inf")).any(dim=-1, keepdim=True)
    lse = torch.logsumexp(s, dim=-1, keepdim=True)
    p = torch.exp(s - torch.where(seen, lse, torch.zeros_like(lse)))
    if c.learnable_sink is not None:
        p = p[..., :-1]
    out = _grouped(p.to(v_dtype).float(), n2) @ v
    lse = torch.where(seen, lse, torch.full_like(lse, float("inf")))
    return out.reshape(n1, sq, -1), lse.squeeze(-1)


def _spans(c: Call, f: dict):
    """Each batch's (query start, query length, key start, key length), with the rules on
    the values checked: the lengths, the block ids a batch reads, the causal modes' mask.
    Starts are rows of the packed T dim (0 in the B layouts and for paged caches)."""
    b = f["b"]
    if f["t_layout"]:
        q_starts, q_lens = _cumulative(c, "q", c.q_lens,
                                       _sizes(c.query, f["q_layout"], f["n1"])[0])
        if f["paged"]:
            k_starts, k_lens = [0] * b, _per_batch(c, "kv", c.kv_lens, b, f["skv"])
        else:
            k_starts, k_lens = _cumulative(c, "kv", c.kv_lens,
                                           _sizes(c.key, f["q_layout"], f["n2"])[0])
    else:
        sq, skv = f["sq"], f["skv"]
        q_lens = [sq] * b if c.q_lens is None or sq == 1 else \
            _per_batch(c, "q", c.q_lens, b, sq)
        k_lens = [skv] * b if c.kv_lens is None else _per_batch(c, "kv", c.kv_lens, b, skv)
        q_starts, k_starts = [0] * b, [0] * b
    if f["paged"] and b:
        table = c.block_table
        needed = torch.arange(table.shape[1], device=table.device).unsqueeze(0) < torch.tensor(
            [-(-n // c.block_size) for n in k_lens], device=table.device).unsqueeze(1)
        bad = needed & ((table < 0) | (table >= c.key.shape[0]))
        if bool(bad.any()):
            i, j = (int(x) for x in bad.nonzero()[0])
            fail(c.op, "block_table", f"must hold block ids in [0, {c.key.shape[0]}) for the "
                 f"blocks each batch reads, got {int(table[i, j])} at ({i}, {j})")
    if c.atten_mask is not None and c.sparse_mode in (2, 3, 4) and \
            not (f["sq"] == 1 and c.query_rope is None):
        _check_causal_mask(c)
    return q_starts, q_lens, k_starts, k_lens


def _kv_rows(c: Call, f: dict, t, b: int, start: int, length: int, heads: int):
    """Batch b's first ``length`` key / value rows as (heads, length, D)."""
    if f["paged"]:
        bs = c.block_size
        nblk = -(-length // bs)
        blocks = t.index_select(0, c.block_table[b, :nblk].long())
        if t.dim() == 3:
            return blocks.reshape(nblk * bs, heads, -1)[:length].transpose(0, 1)
        return blocks.transpose(0, 1).reshape(heads, nblk * bs, -1)[:, :length]
    if f["t_layout"]:
        return _to_bnsd(t, f["q_layout"], heads)[:, start:start + length]
    return _to_bnsd(t, f["q_layout"], heads)[b, :, :length]


def _q_rows(f: dict, t, b: int, start: int, length: int):
    """Batch b's query rows as (N1, length, D): of the (B, N, S, D) / (N, T, D) view."""
    return t[:, start:start + length] if f["t_layout"] else t[b, :, :length]


def _out_views(c: Call, f: dict, out, lse):
    """The output and lse as (B, S, N, D) and (B, S, N) views (a T layout's: the packed T
    dim with batch stride 0)."""
    b, lay = f["b"], f["out_layout"]
    if f["t_layout"]:
        o = out if lay == "TND" else out.transpose(0, 1)
        return o.unsqueeze(0).expand(b, *o.shape), lse[..., 0].unsqueeze(0).expand(b, *lse.shape[:2])
    if lay == "BSH":
        o = out.view(out.shape[0], out.shape[1], f["n1"], out.shape[2] // f["n1"])
    elif lay == "BSND":
        o = out
    elif lay == "BNSD":
        o = out.transpose(1, 2)
    elif lay == "NBSD":
        o = out.permute(1, 2, 0, 3)
    else:  # NSD
        o = out.unsqueeze(0).transpose(1, 2)
    return o, lse[..., 0].transpose(1, 2)


def _outputs(c: Call, f: dict):
    """attention_out zeroed and the lse (always: the kernels write it) at +inf: the rows no
    batch covers keep these values."""
    out_shape, lse_shape = output_shapes(c, f)
    return (c.query.new_zeros(out_shape),
            c.query.new_full(lse_shape, float("inf"), dtype=torch.float32))


def _results(c: Call, out, lse):
    return out, (lse if c.lse_flag else c.query.new_empty((0,), dtype=torch.float32))


def _compute(c: Call):
    f = check_call(c)
    q_starts, q_lens, k_starts, k_lens = _spans(c, f)
    n1, n2 = f["n1"], f["n2"]
    out, lse = _outputs(c, f)
    o4, l3 = _out_views(c, f, out, lse)
    qn = _to_bnsd(c.query, f["q_layout"], n1)
    qrn = None if c.query_rope is None else _to_bnsd(c.query_rope, f["q_layout"], n1)
    for bi in range(f["b"]):
        q0, sq_b, k0, skv_b = q_starts[bi], q_lens[bi], k_starts[bi], k_lens[bi]
        if sq_b == 0:
            continue
        pse = None
        if c.pse_shift is not None:
            p = c.pse_shift
            pse = p[bi if p.shape[0] > 1 else 0, :, :sq_b, :skv_b]
        kr = None if c.key_rope is None else _kv_rows(c, f, c.key_rope, bi, k0, skv_b, n2)
        o, ls = _attend(c, f, _q_rows(f, qn, bi, q0, sq_b),
                        _kv_rows(c, f, c.key, bi, k0, skv_b, n2),
                        _kv_rows(c, f, c.value, bi, k0, skv_b, n2),
                        None if qrn is None else _q_rows(f, qrn, bi, q0, sq_b), kr, pse,
                        _visible(c, f, bi, sq_b, skv_b, c.query.device))
        at = 0 if f["t_layout"] else bi  # (the T layouts' views repeat one batch)
        if o4.shape[-1] == o.shape[-1]:  # (a head dim of 0: the output stays 0)
            o4[at, q0:q0 + sq_b] = o.transpose(0, 1)
        l3[at, q0:q0 + sq_b] = ls.transpose(0, 1)
    return _results(c, out, lse)


def _mask3(c: Call, f: dict):
    """atten_mask as a (B, Sq, Skv) view (stride 0 where it broadcasts), uint8."""
    m = c.atten_mask
    if m.dtype == torch.bool:
        m = m.view(torch.uint8)
    b = f["b"]
    if m.dim() == 2:
        m = m.unsqueeze(1) if f["sq"] == 1 else m.unsqueeze(0)
    elif m.dim() == 4:
        m = m[:, 0]
    return m.expand(b, *m.shape[1:])


def _cuda(c: Call):
    """The CUDA kernel (Triton, op_sdk/triton_kernels/attention.py); head dims above its
    limit run the reference."""
    from op_sdk.triton_kernels import attention

    f = check_call(c)
    if not attention.covers(f["dq"], f["dv"], f["dr"]) or 0 in (f["dq"], f["dv"]):
        return _compute(c)
    q_starts, q_lens, k_starts, k_lens = _spans(c, f)
    out, lse = _outputs(c, f)
    o4, l3 = _out_views(c, f, out, lse)
    b, n1, n2 = f["b"], f["n1"], f["n2"]

    def bsnd(t, heads):
        v = _to_bnsd(t, f["q_layout"], heads)
        return v.transpose(0, 1).unsqueeze(0).expand(b, *v.transpose(0, 1).shape) \
            if f["t_layout"] else v.transpose(1, 2)

    def cache(t):  # (blocks, block_size, N2, D)
        return t.view(t.shape[0], t.shape[1], n2, -1) if t.dim() == 3 else t.transpose(1, 2)

    kv = cache if f["paged"] else (lambda t: bsnd(t, n2))
    use_mask, band, shift = _band(c, f)
    ints = lambda v: torch.tensor(v, dtype=torch.int32, device=c.query.device)  # noqa: E731
    pse = None if c.pse_shift is None else c.pse_shift.expand(b, *c.pse_shift.shape[1:])
    attention.run(
        bsnd(c.query, n1), kv(c.key), kv(c.value),
        None if c.query_rope is None else bsnd(c.query_rope, n1),
        None if c.key_rope is None else kv(c.key_rope), o4, l3,
        _mask3(c, f) if use_mask else None, pse,
        None if c.learnable_sink is None else c.learnable_sink.contiguous(),
        c.block_table, ints(q_starts), ints(q_lens), ints(k_starts), ints(k_lens),
        n1=n1, group=n1 // n2, scale=c.scale, band=band, shift=shift,
        block_size=max(c.block_size, 1), max_q=max(q_lens, default=0))
    return _results(c, out, lse)


def _run(run: str, c: Call):
    return {"fake": _fake, "cuda": _cuda}.get(run, _compute)(c)


def _refuse(op: str, given: dict, table: dict) -> None:
    for name, why in table.items():
        check(given[name] is None, op, name, f"must be None ({why})")


# ---- the four operators' entry points -------------------------------------------------------

def _v1(op: str, run: str):
    """npu_fused_infer_attention_score's entry point (torch_npu's schema and TorchAir's: the
    lengths a list or a tensor)."""
    def entry(query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
              actual_seq_lengths_kv=None, dequant_scale1=None, quant_scale1=None,
              dequant_scale2=None, quant_scale2=None, quant_offset2=None, antiquant_scale=None,
              antiquant_offset=None, key_antiquant_scale=None, key_antiquant_offset=None,
              value_antiquant_scale=None, value_antiquant_offset=None, block_table=None,
              query_padding_size=None, kv_padding_size=None, key_shared_prefix=None,
              value_shared_prefix=None, actual_shared_prefix_len=None, query_rope=None,
              key_rope=None, key_rope_antiquant_scale=None, num_heads=1, scale=1.0,
              pre_tokens=INT_MAX, next_tokens=INT_MAX, input_layout="BSH",
              num_key_value_heads=0, sparse_mode=0, inner_precise=0, block_size=0,
              antiquant_mode=0, key_antiquant_mode=0, value_antiquant_mode=0,
              softmax_lse_flag=False):
        given = dict(locals())
        _refuse(op, given, UNSUPPORTED_V1)
        check(antiquant_mode in (0, 1), op, "antiquant_mode",
              f"must be 0 or 1, got {antiquant_mode}")
        for name in ("key_antiquant_mode", "value_antiquant_mode"):
            check(0 <= given[name] <= 5, op, name, f"must be in [0, 5], got {given[name]}")
        return _run(run, Call(
            op, query, key, value, pse_shift=pse_shift, atten_mask=atten_mask,
            q_lens=actual_seq_lengths, kv_lens=actual_seq_lengths_kv, block_table=block_table,
            query_rope=query_rope, key_rope=key_rope, learnable_sink=None,
            num_heads=num_heads, num_key_value_heads=num_key_value_heads, scale=scale,
            pre_tokens=pre_tokens, next_tokens=next_tokens, input_layout=input_layout,
            sparse_mode=sparse_mode, inner_precise=inner_precise, block_size=block_size,
            lse_flag=softmax_lse_flag))
    entry.__name__ = f"fused_infer_attention_score_{run}"
    return entry


_V2_DTYPE_ARGS = {"query_dtype": "query", "key_dtype": "key", "value_dtype": "value",
                  "query_rope_dtype": "query_rope", "key_rope_dtype": "key_rope",
                  "key_shared_prefix_dtype": None, "value_shared_prefix_dtype": None,
                  "dequant_scale_query_dtype": None, "dequant_scale_key_dtype": None,
                  "dequant_scale_value_dtype": None, "dequant_scale_key_rope_dtype": None}


def _v2(op: str, run: str):
    """npu_fused_infer_attention_score_v2's entry point."""
    def entry(query, key, value, *, query_rope=None, key_rope=None, pse_shift=None,
              atten_mask=None, actual_seq_qlen=None, actual_seq_kvlen=None, block_table=None,
              dequant_scale_query=None, dequant_scale_key=None, dequant_offset_key=None,
              dequant_scale_value=None, dequant_offset_value=None, dequant_scale_key_rope=None,
              quant_scale_out=None, quant_offset_out=None, quant_scale_p=None,
              learnable_sink=None, num_query_heads=1, num_key_value_heads=0, softmax_scale=1.0,
              pre_tokens=INT_MAX, next_tokens=INT_MAX, input_layout="BSH", sparse_mode=0,
              block_size=0, query_quant_mode=0, key_quant_mode=0, value_quant_mode=0,
              inner_precise=0, return_softmax_lse=False, query_dtype=None, key_dtype=None,
              value_dtype=None, query_rope_dtype=None, key_rope_dtype=None,
              key_shared_prefix_dtype=None, value_shared_prefix_dtype=None,
              dequant_scale_query_dtype=None, dequant_scale_key_dtype=None,
              dequant_scale_value_dtype=None, dequant_scale_key_rope_dtype=None, out_dtype=None):
        given = dict(locals())
        _refuse(op, given, UNSUPPORTED_V2)
        for name, tensor_name in _V2_DTYPE_ARGS.items():
            code, t = given[name], given.get(tensor_name) if tensor_name else None
            own = CODE_OF.get(t.dtype) if t is not None else None
            check(code is None or (own is not None and code == own), op, name,
                  f"must be None or its tensor's own dtype code ({dtype_value_str(own)}): "
                  f"other dtypes are {_QUANT}, got {dtype_value_str(code)}")
        check(out_dtype is None or out_dtype == CODE_OF.get(query.dtype), op, "out_dtype",
              f"must be None or query's dtype code ({dtype_value_str(query.dtype)}): other "
              f"output dtypes are {_QUANT}, got {dtype_value_str(out_dtype)}")
        return _run(run, Call(
            op, query, key, value, pse_shift=pse_shift, atten_mask=atten_mask,
            q_lens=actual_seq_qlen, kv_lens=actual_seq_kvlen, block_table=block_table,
            query_rope=query_rope, key_rope=key_rope, learnable_sink=learnable_sink,
            num_heads=num_query_heads, num_key_value_heads=num_key_value_heads,
            scale=softmax_scale, pre_tokens=pre_tokens, next_tokens=next_tokens,
            input_layout=input_layout, sparse_mode=sparse_mode, inner_precise=inner_precise,
            block_size=block_size, lse_flag=return_softmax_lse))
    entry.__name__ = f"fused_infer_attention_score_v2_{run}"
    return entry


fused_infer_attention_score_reference = _v1(OP, "reference")
fused_infer_attention_score_fake = _v1(OP, "fake")
fused_infer_attention_score_v2_reference = _v2(OP_V2, "reference")
fused_infer_attention_score_v2_fake = _v2(OP_V2, "fake")

_V1_TAIL = (
    "Tensor? dequant_scale1=None, Tensor? quant_scale1=None, Tensor? dequant_scale2=None, "
    "Tensor? quant_scale2=None, Tensor? quant_offset2=None, Tensor? antiquant_scale=None, "
    "Tensor? antiquant_offset=None, Tensor? key_antiquant_scale=None, "
    "Tensor? key_antiquant_offset=None, Tensor? value_antiquant_scale=None, "
    "Tensor? value_antiquant_offset=None, Tensor? block_table=None, "
    "Tensor? query_padding_size=None, Tensor? kv_padding_size=None, "
    "Tensor? key_shared_prefix=None, Tensor? value_shared_prefix=None, "
    "{prefix_len} actual_shared_prefix_len=None, Tensor? query_rope=None, "
    "Tensor? key_rope=None, Tensor? key_rope_antiquant_scale=None, int num_heads=1, "
    "float scale=1., int pre_tokens=2147483647, int next_tokens=2147483647, "
    "str input_layout=\"BSH\", int num_key_value_heads=0, int sparse_mode=0, "
    "int inner_precise=0, int block_size=0, int antiquant_mode=0, int key_antiquant_mode=0, "
    "int value_antiquant_mode=0, bool softmax_lse_flag=False) -> (Tensor, Tensor)")
_V2_TAIL = (
    "Tensor? block_table=None, Tensor? dequant_scale_query=None, "
    "Tensor? dequant_scale_key=None, Tensor? dequant_offset_key=None, "
    "Tensor? dequant_scale_value=None, Tensor? dequant_offset_value=None, "
    "Tensor? dequant_scale_key_rope=None, Tensor? quant_scale_out=None, "
    "Tensor? quant_offset_out=None, Tensor? quant_scale_p=None, Tensor? learnable_sink=None, "
    "int num_query_heads=1, int num_key_value_heads=0, float softmax_scale=1., "
    "int pre_tokens=2147483647, int next_tokens=2147483647, str input_layout=\"BSH\", "
    "int sparse_mode=0, int block_size=0, int query_quant_mode=0, int key_quant_mode=0, "
    "int value_quant_mode=0, int inner_precise=0, bool return_softmax_lse=False, "
    "int? query_dtype=None, int? key_dtype=None, int? value_dtype=None, "
    "int? query_rope_dtype=None, int? key_rope_dtype=None, int? key_shared_prefix_dtype=None, "
    "int? value_shared_prefix_dtype=None, int? dequant_scale_query_dtype=None, "
    "int? dequant_scale_key_dtype=None, int? dequant_scale_value_dtype=None, "
    "int? dequant_scale_key_rope_dtype=None, int? out_dtype=None) -> (Tensor, Tensor)")
# the sequence lengths: SymInt[] in torch_npu's schemas, tensors in TorchAir's
_V1_HEAD = ("npu_fused_infer_attention_score(Tensor query, Tensor key, Tensor value, *, "
            "Tensor? pse_shift=None, Tensor? atten_mask=None, {lens} actual_seq_lengths=None, "
            "{lens} actual_seq_lengths_kv=None, ")
_V2_HEAD = ("npu_fused_infer_attention_score_v2(Tensor query, Tensor key, Tensor value, *, "
            "Tensor? query_rope=None, Tensor? key_rope=None, Tensor? pse_shift=None, "
            "Tensor? atten_mask=None, {lens} actual_seq_qlen=None, {lens} actual_seq_kvlen=None, ")

npu_fused_infer_attention_score = define_op(
    _V1_HEAD.format(lens="SymInt[]?") + _V1_TAIL.format(prefix_len="SymInt[]?"),
    reference=fused_infer_attention_score_reference, fake=fused_infer_attention_score_fake,
    kernels={"cuda": TritonKernel(_v1(OP, "cuda"))},
    # one call under torch.compile on CUDA: the launcher reads the lengths, block ids and
    # causal mask back to check them (which a traced graph cannot hold)
    inline=False,
    doc="Inference attention (prefill and decode): softmax(scale * q @ k^T + pse, masked) @ v "
        "per head in float32, with GQA, sequence lengths, sparse modes, paged KV and MLA rope; "
        "returns (attention_out, softmax_lse).",
)

npu_fused_infer_attention_score_v2 = define_op(
    _V2_HEAD.format(lens="SymInt[]?") + _V2_TAIL,
    reference=fused_infer_attention_score_v2_reference, fake=fused_infer_attention_score_v2_fake,
    kernels={"cuda": TritonKernel(_v2(OP_V2, "cuda"))}, inline=False,
    doc="npu_fused_infer_attention_score's v2 signature (num_query_heads, softmax_scale, "
        "actual_seq_qlen / kvlen, return_softmax_lse) with learnable_sink.",
)

air_fused_infer_attention_score = define_op(
    _V1_HEAD.format(lens="Tensor?") + _V1_TAIL.format(prefix_len="Tensor?"),
    namespace="air",
    reference=_v1(OP, "reference"), fake=_v1(OP, "fake"),
    kernels={"cuda": TritonKernel(_v1(OP, "cuda"))}, inline=False,
    doc="TorchAir's npu_fused_infer_attention_score (torchair.ops): the lengths as tensors.",
)

air_fused_infer_attention_score_v2 = define_op(
    _V2_HEAD.format(lens="Tensor?") + _V2_TAIL,
    namespace="air",
    reference=_v2(OP_V2, "reference"), fake=_v2(OP_V2, "fake"),
    kernels={"cuda": TritonKernel(_v2(OP_V2, "cuda"))}, inline=False,
    doc="TorchAir's npu_fused_infer_attention_score_v2 (torchair.ops): the lengths as tensors.",
)
