"""One call of each operator with a Triton kernel (CPU tensors; the GPU tests move them to
CUDA, the trace test makes fake CUDA tensors of their shapes)."""

import torch

from tests.ops._helpers import bf16, fp16, rand


def triton_cases():
    h = 64
    x1, x2, g = rand(6, h, dtype=bf16), rand(6, h, dtype=bf16), rand(h, dtype=bf16)
    s = torch.rand(h) * 0.05 + 0.01
    return {
        "npu_rms_norm": ((rand(3, 5, h, dtype=fp16), rand(h, dtype=fp16)), {}),
        "npu_add_rms_norm": ((x1, x2, g), {}),
        "npu_gemma_rms_norm": ((x1, g), {"epsilon": 1e-5}),
        "npu_add_rms_norm_v2_functional": ((x1, x2, g), {}),
        "npu_rms_norm_quant": ((x1, g, g * 0.1, torch.tensor([0.02], dtype=bf16),
                                torch.tensor([3], dtype=torch.int8)), {}),
        "npu_add_rms_norm_cast": ((x1, x2, g), {}),
        "npu_add_rms_norm_quant": ((x1.half(), x2.half(), g.half(), s,
                                    torch.randint(-4, 4, (h,), dtype=torch.int32)), {}),
        "npu_add_rms_norm_dynamic_quant": ((x1, x2, g), {"smooth_scale1": (s + 0.5).to(bf16)}),
        "npu_dynamic_quant": ((x1,), {"smooth_scales": (s + 0.5).to(bf16)}),
        "npu_swiglu": ((x1,), {}),
        "npu_swiglu_backward": ((rand(6, h // 2, dtype=bf16), x1), {}),
        "npu_quantize": ((x1, s, torch.randint(-4, 4, (h,), dtype=torch.int32), torch.qint8,
                          -1), {}),
        "npu_swiglu_quant": ((x1,), {"smooth_scales": s[None, : h // 2] + 0.5,
                                     "activate_left": True, "quant_mode": 1}),
        "npu_interleave_rope": ((rand(2, 3, 4, 64, dtype=bf16), rand(2, 1, 4, 64, dtype=bf16),
                                 rand(2, 1, 4, 64, dtype=bf16)), {}),
        "npu_apply_rotary_pos_emb": ((rand(3, 4, 64, dtype=bf16), rand(3, 2, 64, dtype=bf16),
                                      rand(3, 1, 64, dtype=bf16), rand(3, 1, 64, dtype=bf16)),
                                     {"layout": "TND"}),
        "npu_quant_matmul": ((torch.randint(-128, 128, (24, 32), dtype=torch.int8),
                              torch.randint(-128, 128, (16, 32), dtype=torch.int8).t(),
                              torch.rand(16) * 1e-3),
                             {"pertoken_scale": torch.rand(24) + 0.5, "output_dtype": bf16}),
        "npu_transpose_batchmatmul": ((rand(5, 3, 32, dtype=fp16), rand(3, 32, 16, dtype=fp16)),
                                      {"scale": torch.rand(48) + 0.5, "perm_x1": [1, 0, 2]}),
        "npu_dtype_cast": ((x1, 3), {}),
        "npu_dynamic_mx_quant": ((rand(6, 2 * h, dtype=bf16),), {"dst_type": 292}),
        "npu_rms_norm_dynamic_mx_quant": ((x1, g), {"dst_type": 296, "scale_alg": 0}),
        "npu_add_rms_norm_dynamic_mx_quant": ((x1, x2, g), {"beta": g, "dst_type": 291,
                                                             "scale_alg": 1}),
        "npu_rotary_mul": ((rand(2, 3, 4, h, dtype=bf16), rand(2, 1, 4, h, dtype=bf16),
                            rand(2, 1, 4, h, dtype=bf16)), {"rotary_mode": "interleave-half"}),
        # (r1 / r2 of input's shape: the broadcast form's sum cannot run on fake CUDA tensors
        # in a CPU-only torch, so the trace test takes this one)
        "npu_rotary_mul_backward": ((rand(2, 3, 4, h, dtype=bf16), rand(2, 3, 4, h, dtype=bf16),
                                     rand(2, 3, 4, h, dtype=bf16), rand(2, 3, 4, h, dtype=bf16)),
                                    {"rotary_mode": "quarter"}),
    }


def call_cases():
    """One call of each operator whose Triton launcher reads values back to check them
    (``inline=False``: one call in a compiled graph on CUDA too)."""
    from tests.ops import test_fused_infer_attention_score as fias
    from tests.ops import test_kv_rmsnorm_rope_cache as kvc
    from tests.ops import test_qkv_rms_norm_rope_cache as qkvc

    att = {name: (args, kw) for name, args, kw in fias.samples()}
    q_args, q_kw = qkvc.make(quant=True, offset=True)
    return {
        "npu_kv_rmsnorm_rope_cache": kvc.make("PA_NZ", dv=64, dk=32, quant=True),
        "npu_kv_rmsnorm_rope_cache_v2_functional": kvc.make("PA_BNSD", dv=64, dk=32),
        "npu_qkv_rms_norm_rope_cache_functional": (q_args, dict(q_kw, is_output_qkv=True)),
        "npu_fused_infer_attention_score": att[fias.V1],
        "npu_fused_infer_attention_score_v2": att[fias.V2],
        "npu_scatter_nd_update": ((rand(6, 4, 8, dtype=bf16), torch.tensor([[1, 2], [5, 0]]),
                                   rand(2, 8, dtype=bf16)), {}),
    }
