"""npu_kv_rmsnorm_rope_cache -> KvRmsNormRopeCache (ops-transformer posembedding/
kv_rms_norm_rope_cache), as TorchAir converts it: the caches are the operator's in-place
inputs k_cache / ckv_cache (GE writes them where they are, as torch_npu's NPU kernel does;
op_sdk's CPU / CUDA kernels return copies, the schema declaring no mutation: docs/
operators.md). npu_kv_rmsnorm_rope_cache_v2_functional -> the same operator on TensorMove
copies, its outputs reordered to (k_rope, c_kv, k_cache, ckv_cache), as TorchAir's converter;
the in-place npu_kv_rmsnorm_rope_cache_v2, where a graph keeps it, runs on the caches
themselves."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype (ops-transformer posembedding/kv_rms_norm_rope_cache/op_graph:
# REG_OP(KvRmsNormRopeCache), with the optional input v of the version TorchAir's generated
# wrapper states (torch_npu 2.13.0): op_sdk never feeds it (the operators refuse v)
ir.declare("KvRmsNormRopeCache",
           "kv gamma cos sin index k_cache ckv_cache k_rope_scale? c_kv_scale? k_rope_offset? "
           "c_kv_offset? v?", "k_cache ckv_cache k_rope c_kv",
           [("epsilon", "Float", 1e-5), ("cache_mode", "String", "Norm"),
            ("is_output_kv", "Bool", False)], source="ops-transformer")


def _kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                           c_kv_scale, k_rope_offset, c_kv_offset, epsilon, cache_mode,
                           is_output_kv):
    return ge.KvRmsNormRopeCache(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                                 c_kv_scale, k_rope_offset, c_kv_offset, None, epsilon=epsilon,
                                 cache_mode=cache_mode, is_output_kv=is_output_kv)


@register_fx_node_ge_converter(torch.ops.npu.npu_kv_rmsnorm_rope_cache.default,
                               torchair_has_own=True)
def convert_npu_kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, *,
                                      k_rope_scale=None, c_kv_scale=None, k_rope_offset=None,
                                      c_kv_offset=None, v=None, epsilon=1e-5, cache_mode="Norm",
                                      is_output_kv=False, meta_outputs=None):
    return _kv_rmsnorm_rope_cache(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                                  c_kv_scale, k_rope_offset, c_kv_offset, epsilon, cache_mode,
                                  is_output_kv)


@register_fx_node_ge_converter(torch.ops.npu.npu_kv_rmsnorm_rope_cache_v2_functional.default,
                               torchair_has_own=True)
def convert_npu_kv_rmsnorm_rope_cache_v2_functional(
        kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None, c_kv_scale=None,
        k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5, cache_mode="Norm",
        is_output_kv=False, k_cache_dtype=None, ckv_cache_dtype=None, meta_outputs=None):
    k_out, v_out, k_rope, c_kv = _kv_rmsnorm_rope_cache(
        kv, gamma, cos, sin, index, ge.TensorMove(k_cache), ge.TensorMove(ckv_cache),
        k_rope_scale, c_kv_scale, k_rope_offset, c_kv_offset, epsilon, cache_mode, is_output_kv)
    return k_rope, c_kv, k_out, v_out


@register_fx_node_ge_converter(torch.ops.npu.npu_kv_rmsnorm_rope_cache_v2.default)
def convert_npu_kv_rmsnorm_rope_cache_v2(
        kv, gamma, cos, sin, index, k_cache, ckv_cache, *, k_rope_scale=None, c_kv_scale=None,
        k_rope_offset=None, c_kv_offset=None, v=None, epsilon=1e-5, cache_mode="Norm",
        is_output_kv=False, k_cache_dtype=None, ckv_cache_dtype=None, meta_outputs=None):
    _, _, k_rope, c_kv = _kv_rmsnorm_rope_cache(
        kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale, k_rope_offset,
        c_kv_offset, epsilon, cache_mode, is_output_kv)
    return k_rope, c_kv
