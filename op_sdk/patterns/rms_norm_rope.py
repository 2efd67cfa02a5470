"""Fusion 8 (op_sdk's; not in TorchAir's table): a head's RMSNorm then its RoPE, ``npu_rms_norm(x,
gamma, eps)[0]`` -> (the heads moved before the tokens) -> ``npu_rotary_mul(., cos, sin)``,
becomes ``op_sdk::rms_norm_rope`` on x (moved the same way: a view, the kernel reads it in
place): Qwen3's q_norm / k_norm followed by apply_rotary_pos_emb, after the native rules have
made the norm npu_rms_norm and the RoPE npu_rotary_mul (vLLM's qk_norm_rope, vllm-ascend's
QKNormRopeFusionPass on a packed qkv).

Why an operator of op_sdk's own: torch_npu 2.13.0 has none whose contract is this chain
(npu_qkv_rms_norm_rope_cache takes a packed qkv and writes the key / value into paged caches;
npu_kv_rmsnorm_rope_cache is DeepSeek's MLA); op_sdk::rms_norm_rope is declared as a user's
plugin operator is (op_sdk/ops/rms_norm_rope.py).

Variants, derived from the operator's ``composite=``: the heads kept in place, or moved by
``permute(0, 2, 1, 3)`` (the post-grad graph's spelling of Hugging Face's ``.transpose(1, 2)``,
and op_sdk's canonical spelling of that transpose; the composite's ``heads`` step, moved onto x
in the replacement); epsilon explicit or left to its default. The fused operator computes the
chain bit for bit (the norm rounded to x's dtype in between, as npu_rms_norm returns it).
Checks: gamma 1-D (a norm over the last dim only: the rotation runs along it); the permute's
dims those (the matcher ignores a permute's dims); the rest (x 3-D / 4-D, an even head dim up
to 1024, cos / sin broadcasting to x, the dtype pairs) are the fused operator's own rules,
which veto a match they would refuse.
"""

from __future__ import annotations

import torch

from op_sdk.patterns.checks import fmt, node_of, val
from op_sdk.patterns.diagnostics import Check
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.fusion import Fusion
from op_sdk.ops.rms_norm_rope import HEADS_FIRST

npu = torch.ops.npu

aten = torch.ops.aten

variants = derived_variants("rms_norm_rope", namespace="op_sdk")


def example_inputs(dtype=torch.float16, variant=None, *, tokens=7, heads=3, head_dim=16,
                   batch=2):
    """Qwen3's q: (B, S, N, D) before the heads move; cos / sin (B, 1, S, D) after (the
    layout npu_rotary_mul sees), (B, S, 1, D) where the heads stay."""
    moved = variant is not None and variant.name.startswith("permute")
    cs = (batch, 1, tokens, head_dim) if moved else (batch, tokens, 1, head_dim)
    return {"x": torch.randn(batch, tokens, heads, head_dim, dtype=dtype),
            "gamma": (torch.rand(head_dim) + 0.5).to(dtype),
            "cos": torch.randn(cs, dtype=dtype), "sin": torch.randn(cs, dtype=dtype),
            "epsilon": 1e-5}


def _heads_before_tokens(match) -> str | None:
    permute = node_of(match, aten.permute.default)
    if permute is not None and tuple(permute.args[1]) != HEADS_FIRST:
        return (f"the norm's output is permuted by {list(permute.args[1])}; the fusion moves x "
                f"by {list(HEADS_FIRST)} (the heads before the tokens) only")
    return None


def _norm_over_last_dim(match) -> str | None:
    gamma = val(node_of(match, npu.npu_rms_norm.default).args[1])
    if gamma.dim() != 1:
        return (f"npu_rms_norm normalises over the last {gamma.dim()} dims (gamma "
                f"{fmt(gamma.shape)}); op_sdk::rms_norm_rope normalises each row the rotation "
                "runs along (gamma 1-D)")
    return None


FUSION = Fusion(
    name="rms_norm_rope",
    number=8,
    fused_op="op_sdk::rms_norm_rope",
    unfused_ops=("npu.npu_rms_norm", "npu.npu_rotary_mul"),
    variants=variants,
    example_inputs=example_inputs,
    checks=(Check("norm_over_last_dim", "shape", _norm_over_last_dim),
            Check("heads_before_tokens", "args", _heads_before_tokens)),
    dtypes=(torch.bfloat16, torch.float16, torch.float32),
    torchair_max_autotune=False,
    opaque_to_inductor=True,
    doc=__doc__,
)
