"""Fusion 6 (beyond TorchAir's five): npu_swiglu(x, -1) -> npu_dynamic_quant(y) becomes
npu_swiglu_quant(x, activate_left=True, quant_mode=1), the SiLU(gate) * up + dynamic int8
quantisation that vLLM's act_quant pass and vllm-ascend fuse in a W8A8 MLP.

One variant, derived from the operator's ``composite=``: npu_swiglu_quant returns the
quantisation multiplier 127 / amax where npu_dynamic_quant returns amax / 127, so the
replacement hands the graph 1 / multiplier (within one float32 rounding of amax / 127; 0 on
an all-zero row, as npu_dynamic_quant's). The fused kernel quantises the float32 SwiGLU
instead of its fp16 / bf16 rounding: the int8 result may differ by one step (the contract's
choice, as fusion 1). Checks: npu_swiglu halves the last dim; npu_dynamic_quant is int8 per
token without smoothing or groups (npu_swiglu_quant's smooth_scales are (1, N), not the 1-D
(N,) of npu_dynamic_quant); x's last dim at most 8192.
"""

from __future__ import annotations

import torch

from op_sdk.ops.swiglu_quant import MAX_LAST_DIM
from op_sdk.patterns.add_rms_norm_dynamic_quant import dynamic_quant_is_int8_per_token
from op_sdk.patterns.checks import fmt, known, node_of, val
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.diagnostics import Check
from op_sdk.patterns.fusion import Fusion

npu = torch.ops.npu

variants = derived_variants("npu_swiglu_quant")


def example_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    return {"x": torch.randn((*lead, tokens, 2 * hidden), dtype=dtype)}


def _swiglu_last_dim(match) -> str | None:
    swiglu = node_of(match, npu.npu_swiglu.default)
    x = val(swiglu.args[0])
    dim = swiglu.args[1] if len(swiglu.args) > 1 else swiglu.kwargs.get("dim", -1)
    if dim % x.dim() != x.dim() - 1:
        return (f"npu_swiglu halves dim {dim} of a {x.dim()}-D input; npu_swiglu_quant halves "
                "the last dim")
    if not known(x.shape[-1] <= MAX_LAST_DIM):
        return (f"x's last dim {fmt(x.shape[-1])} is not known to be at most {MAX_LAST_DIM} "
                "(npu_swiglu_quant's limit)")
    return None


def _quant_form(match) -> str | None:
    return dynamic_quant_is_int8_per_token(node_of(match, npu.npu_dynamic_quant.default),
                                           smooth_allowed=False)


FUSION = Fusion(
    name="swiglu_quant",
    number=6,
    fused_op="npu_swiglu_quant",
    unfused_ops=("npu.npu_swiglu", "npu.npu_dynamic_quant"),
    variants=variants,
    example_inputs=example_inputs,
    checks=(Check("swiglu_last_dim", "shape", _swiglu_last_dim),
            Check("int8_per_token", "args", _quant_form)),
    dtypes=(torch.float16, torch.bfloat16, torch.float32),
    torchair_max_autotune=False,
    opaque_to_inductor=True,
    doc=__doc__,
)
