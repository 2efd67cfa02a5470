"""npu_qkv_rms_norm_rope_cache -> QkvRmsNormRopeCache on q_out and the caches themselves (the
IR operator updates them in place: its outputs q_out / k_cache / v_cache are its inputs);
npu_qkv_rms_norm_rope_cache_functional -> the same operator on TensorMove copies, its
outputs reordered to (q, k, v before quantisation, q_out, k_cache, v_cache), as TorchAir
converts both (its custom/npu_qkv_rms_norm_rope_cache.py)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype, as TorchAir's generated wrapper states REG_OP(QkvRmsNormRopeCache)
# (torch_npu 2.13.0, torchair/_ge_concrete_graph/auto_generated_ge_raw_ops.py; no op_graph
# header of it is published in ops-transformer)
ir.declare("QkvRmsNormRopeCache",
           "qkv q_gamma k_gamma cos sin index q_out k_cache v_cache k_scale? v_scale? k_offset? "
           "v_offset?",
           "q_out k_cache v_cache q_out_before_quant k_out_before_quant v_out_before_quant",
           [("qkv_size", "ListInt"), ("head_nums", "ListInt"), ("epsilon", "Float", 1e-6),
            ("cache_mode", "String", "PA_NZ"), ("is_output_qkv", "Bool", False)],
           source="torchair")


def _qkv(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums,
         k_scale, v_scale, k_offset, v_offset, epsilon, cache_mode, is_output_qkv):
    return ge.QkvRmsNormRopeCache(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache,
                                  v_cache, k_scale, v_scale, k_offset, v_offset,
                                  qkv_size=list(qkv_size), head_nums=list(head_nums),
                                  epsilon=epsilon, cache_mode=cache_mode,
                                  is_output_qkv=is_output_qkv)


@register_fx_node_ge_converter(torch.ops.npu.npu_qkv_rms_norm_rope_cache.default,
                               torchair_has_own=True)
def convert_npu_qkv_rms_norm_rope_cache(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache,
                                        v_cache, qkv_size, head_nums, *, k_scale=None,
                                        v_scale=None, k_offset=None, v_offset=None,
                                        epsilon=1e-6, cache_mode="PA_NZ", is_output_qkv=False,
                                        meta_outputs=None):
    out = _qkv(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size,
               head_nums, k_scale, v_scale, k_offset, v_offset, epsilon, cache_mode,
               is_output_qkv)
    return out[3], out[4], out[5]


@register_fx_node_ge_converter(torch.ops.npu.npu_qkv_rms_norm_rope_cache_functional.default,
                               torchair_has_own=True)
def convert_npu_qkv_rms_norm_rope_cache_functional(
        qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size, head_nums, *,
        k_scale=None, v_scale=None, k_offset=None, v_offset=None, epsilon=1e-6,
        cache_mode="PA_NZ", is_output_qkv=False, meta_outputs=None):
    out = _qkv(qkv, q_gamma, k_gamma, cos, sin, index, ge.TensorMove(q_out),
               ge.TensorMove(k_cache), ge.TensorMove(v_cache), qkv_size, head_nums, k_scale,
               v_scale, k_offset, v_offset, epsilon, cache_mode, is_output_qkv)
    return out[3], out[4], out[5], out[0], out[1], out[2]
