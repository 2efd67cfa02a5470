"""Fusion 9 (op_sdk's; not in TorchAir's table): after a W8A8 GEMM that returns its int32
accumulator (``npu_quant_matmul(..., output_dtype=torch.int32)``, or a MoE's grouped GEMM),
the dequantisation ``x.float() * weight_scale * activation_scale``, ``npu_swiglu(t, -1)`` and
``npu_dynamic_quant(., smooth_scales=quant_scale)`` become one
``npu_dequant_swiglu_quant(x, weight_scale=, activation_scale=, quant_scale=,
activate_left=True, quant_mode=1)``: the chain vllm-ascend's W8A8 MoE hands to torch_npu's
operator, and vLLM's act_quant pass with the dequantisation in front.

Variants, derived from the operator's ``composite=``: the cast spelled ``.to()`` / ``.float()``
or ``npu._npu_dtype_cast`` (torch_npu's lowering), with and without npu_dynamic_quant's
smooth scales. The operator computes the chain bit for bit (npu_dynamic_quant's scale is
amax / 127 and its y ``round(t * (127 / amax))``, the operator's). Checks: x an int32
accumulator; npu_dynamic_quant int8 per token (no groups, no other dst_type, smooth scales
only in the smoothed variants); npu_swiglu's dim is the pattern's literal -1. The scales'
shapes and dtypes (weight_scale float32 (2H,), one activation scale per row, quant_scale
(H,)) are the operator's own rules, which veto a match they would refuse (a (1, 2H)
activation scale, a bf16 weight scale). Applied before fusion 6 (``before``), whose
npu_swiglu -> npu_dynamic_quant is a part of this chain.
"""

from __future__ import annotations

import torch

from op_sdk.patterns.add_rms_norm_cast import _CAST_TARGETS
from op_sdk.patterns.add_rms_norm_dynamic_quant import dynamic_quant_is_int8_per_token
from op_sdk.patterns.checks import node_of, val
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.diagnostics import Check
from op_sdk.patterns.fusion import Fusion

npu = torch.ops.npu

_DEQUANT = ("x", "weight_scale", "activation_scale")
_plain = derived_variants("npu_dequant_swiglu_quant", inputs=_DEQUANT,
                          name=lambda c: c["cast"])
_smooth = derived_variants("npu_dequant_swiglu_quant", inputs=_DEQUANT + ("quant_scale",),
                           name=lambda c: c["cast"] + "+smooth")


def variants():
    return _smooth() + _plain()  # a smoothed chain offered to its own variant first


def example_inputs(dtype=torch.float32, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    """A W8A8 MLP's int32 gate / up accumulator (lead..., tokens, 2H), its weight's (2H,)
    scale, the tokens' (lead..., tokens, 1) scale and, for the smoothed variants, the
    smooth scales (H,); ``dtype`` is the scales' (float32: the operator's)."""
    g = torch.Generator().manual_seed(tokens)
    x = torch.randint(-3000, 3000, (*lead, tokens, 2 * hidden), generator=g, dtype=torch.int32)
    out = {"x": x, "weight_scale": (torch.rand(2 * hidden, generator=g) * 1e-3).to(dtype),
           "activation_scale": (torch.rand(*lead, tokens, 1, generator=g) + 0.25).to(dtype)}
    if variant is None or variant.name.endswith("smooth"):
        out["quant_scale"] = (torch.rand(hidden, generator=g) + 0.5).to(dtype)
    return out


def _int32_accumulator(match) -> str | None:
    # the cast as the canonical graph spells it (.to() / .float(), torch_npu's lowering)
    cast = next((n for n in match.nodes if n.target in _CAST_TARGETS), None)
    x = val(cast.args[0]) if cast is not None else None
    if x is not None and x.dtype != torch.int32:
        return (f"the dequantised x is {x.dtype}; npu_dequant_swiglu_quant dequantises an int32 "
                "GEMM accumulator")
    return None


def _quant_form(match) -> str | None:
    """int8 per token; smooth scales only where the variant takes them (the matcher does
    not compare a keyword argument the pattern leaves out)."""
    dq = node_of(match, npu.npu_dynamic_quant.default)
    smoothed = "quant_scale" in match.kwargs
    if smoothed and dq.kwargs.get("smooth_scales") is None:
        return False  # an unsmoothed chain: the other variants' (no report)
    return dynamic_quant_is_int8_per_token(dq, smooth_allowed=smoothed)


FUSION = Fusion(
    name="dequant_swiglu_quant",
    number=9,
    fused_op="npu_dequant_swiglu_quant",
    unfused_ops=("npu.npu_swiglu", "npu.npu_dynamic_quant"),
    variants=variants,
    example_inputs=example_inputs,
    checks=(Check("int32_accumulator", "dtype", _int32_accumulator),
            Check("int8_per_token", "args", _quant_form)),
    dtypes=(torch.float32,),
    torchair_max_autotune=False,
    opaque_to_inductor=True,
    doc=__doc__,
    before=("swiglu_quant",),  # its npu_swiglu -> npu_dynamic_quant is fusion 6's pattern
)
