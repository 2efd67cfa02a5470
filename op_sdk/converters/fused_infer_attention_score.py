"""npu_fused_infer_attention_score (and its v2, and TorchAir's air:: forms of both) ->
FusedInferAttentionScore (ops-transformer attention/fused_infer_attention_score), as TorchAir
converts them: key and value as one-tensor dynamic inputs, the sequence lengths as int64
tensors (a Const of a list, a Pack where a length is symbolic), the v2's arguments on the
v1 operator's inputs and attributes (TorchAir's fused_infer_attention_score_v2 converter).
op_sdk's operators refuse the quantised forms, so their inputs are never fed here."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters.aten import sizes

# REG_OP(FusedInferAttentionScore), as TorchAir's generated wrapper of torch_npu 2.13.0
# states it
ir.declare("FusedInferAttentionScore",
           "query key* value* pse_shift? atten_mask? actual_seq_lengths? actual_seq_lengths_kv? "
           "dequant_scale1? quant_scale1? dequant_scale2? quant_scale2? quant_offset2? "
           "antiquant_scale? antiquant_offset? block_table? query_padding_size? "
           "kv_padding_size? key_antiquant_scale? key_antiquant_offset? value_antiquant_scale? "
           "value_antiquant_offset? key_shared_prefix? value_shared_prefix? "
           "actual_shared_prefix_len? query_rope? key_rope? key_rope_antiquant_scale? "
           "dequant_scale_query? learnable_sink? q_start_idx? kv_start_idx?",
           "attention_out softmax_lse",
           [("num_heads", "Int"), ("scale", "Float", 1.0), ("pre_tokens", "Int", 2147483647),
            ("next_tokens", "Int", 2147483647), ("input_layout", "String", "BSH"),
            ("num_key_value_heads", "Int", 0), ("sparse_mode", "Int", 0),
            ("inner_precise", "Int", 0), ("block_size", "Int", 0), ("antiquant_mode", "Int", 0),
            ("softmax_lse_flag", "Bool", False), ("key_antiquant_mode", "Int", 0),
            ("value_antiquant_mode", "Int", 0), ("query_quant_mode", "Int", 0),
            ("pse_type", "Int", 0), ("out_dtype", "Int", 0)], source="ops-transformer")


def _lengths(lens):
    return None if lens is None else sizes(lens)


def _fia(query, key, value, *, pse_shift, atten_mask, q_lens, kv_lens, block_table,
         query_rope, key_rope, learnable_sink, num_heads, scale, pre_tokens, next_tokens,
         input_layout, num_key_value_heads, sparse_mode, inner_precise, block_size, lse_flag,
         out_dtype):
    return ge.FusedInferAttentionScore(
        query, [key], [value], pse_shift=pse_shift, atten_mask=atten_mask,
        actual_seq_lengths=_lengths(q_lens), actual_seq_lengths_kv=_lengths(kv_lens),
        block_table=block_table, query_rope=query_rope, key_rope=key_rope,
        learnable_sink=learnable_sink, num_heads=num_heads, scale=scale, pre_tokens=pre_tokens,
        next_tokens=next_tokens, input_layout=input_layout,
        num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode,
        inner_precise=inner_precise, block_size=block_size, antiquant_mode=0,
        softmax_lse_flag=lse_flag, key_antiquant_mode=0, value_antiquant_mode=0,
        query_quant_mode=0, pse_type=0, out_dtype=out_dtype)


def _v1(query, key, value, *, pse_shift=None, atten_mask=None, actual_seq_lengths=None,
        actual_seq_lengths_kv=None, block_table=None, query_rope=None, key_rope=None,
        num_heads=1, scale=1.0, pre_tokens=2147483647, next_tokens=2147483647,
        input_layout="BSH", num_key_value_heads=0, sparse_mode=0, inner_precise=0,
        block_size=0, softmax_lse_flag=False, meta_outputs=None, **refused):
    # TorchAir's v1 converter writes out_dtype 0
    return _fia(query, key, value, pse_shift=pse_shift, atten_mask=atten_mask,
                q_lens=actual_seq_lengths, kv_lens=actual_seq_lengths_kv,
                block_table=block_table, query_rope=query_rope, key_rope=key_rope,
                learnable_sink=None, num_heads=num_heads, scale=scale, pre_tokens=pre_tokens,
                next_tokens=next_tokens, input_layout=input_layout,
                num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode,
                inner_precise=inner_precise, block_size=block_size, lse_flag=softmax_lse_flag,
                out_dtype=0)


def _v2(query, key, value, *, query_rope=None, key_rope=None, pse_shift=None, atten_mask=None,
        actual_seq_qlen=None, actual_seq_kvlen=None, block_table=None, learnable_sink=None,
        num_query_heads=1, num_key_value_heads=0, softmax_scale=1.0, pre_tokens=2147483647,
        next_tokens=2147483647, input_layout="BSH", sparse_mode=0, block_size=0,
        inner_precise=0, return_softmax_lse=False, out_dtype=None, meta_outputs=None,
        **refused):
    return _fia(query, key, value, pse_shift=pse_shift, atten_mask=atten_mask,
                q_lens=actual_seq_qlen, kv_lens=actual_seq_kvlen, block_table=block_table,
                query_rope=query_rope, key_rope=key_rope, learnable_sink=learnable_sink,
                num_heads=num_query_heads, scale=softmax_scale, pre_tokens=pre_tokens,
                next_tokens=next_tokens, input_layout=input_layout,
                num_key_value_heads=num_key_value_heads, sparse_mode=sparse_mode,
                inner_precise=inner_precise, block_size=block_size,
                lse_flag=return_softmax_lse, out_dtype=out_dtype)


register_fx_node_ge_converter(torch.ops.npu.npu_fused_infer_attention_score.default,
                              torchair_has_own=True)(_v1)
register_fx_node_ge_converter(torch.ops.npu.npu_fused_infer_attention_score_v2.default,
                              torchair_has_own=True)(_v2)
register_fx_node_ge_converter(torch.ops.air.npu_fused_infer_attention_score.default)(_v1)
register_fx_node_ge_converter(torch.ops.air.npu_fused_infer_attention_score_v2.default)(_v2)
