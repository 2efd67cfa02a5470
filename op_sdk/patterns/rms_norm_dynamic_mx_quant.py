"""Fusion 11 (op_sdk's; not in TorchAir's table, vllm-ascend's RMSNormDynamicMxQuant pattern
on Ascend 950): npu_rms_norm -> npu_dynamic_mx_quant(y) becomes
npu_rms_norm_dynamic_mx_quant(x, gamma, epsilon=, scale_alg=, dst_type=).

Bit for bit the chain (the fused operator quantises the norm rounded to x's dtype, as
npu_rms_norm returns it). Variants, derived from the operator's composite
(op_sdk/patterns/_mx_norm.py): scale_alg 1 or 0, dst_type and epsilon spelled or left to
their defaults; rstd unused. Checks as fusion 10's; the operator's own rules veto the rest
(x float16 / bfloat16, gamma 1-D). Applied after fusion 10, whose chain starts with an add.
"""

from __future__ import annotations

import torch

from op_sdk.patterns import _mx_norm
from op_sdk.patterns.checks import HALF
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.diagnostics import Check
from op_sdk.patterns.fusion import Fusion

variants = derived_variants("npu_rms_norm_dynamic_mx_quant", inputs=("x", "gamma"),
                            forms=_mx_norm.forms(()), name=_mx_norm.name)


def example_inputs(dtype=torch.bfloat16, variant=None, *, tokens=7, hidden=64, lead=(2,)):
    return _mx_norm.example_inputs(("x",), dtype, tokens, hidden, lead)


FUSION = Fusion(
    name="rms_norm_dynamic_mx_quant",
    number=11,
    fused_op="npu_rms_norm_dynamic_mx_quant",
    unfused_ops=("npu.npu_rms_norm", "npu.npu_dynamic_mx_quant"),
    variants=variants,
    example_inputs=example_inputs,
    checks=(Check("mx_last_dim_blocks_of_32", "args", _mx_norm.mx_args),),
    dtypes=HALF,
    torchair_max_autotune=False,
    opaque_to_inductor=True,
    doc=__doc__,
)
