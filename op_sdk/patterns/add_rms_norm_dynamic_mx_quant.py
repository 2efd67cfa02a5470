"""Fusion 10 (op_sdk's; not in TorchAir's table, vllm-ascend's AddRMSNormDynamicMxQuant
pattern on Ascend 950): npu_add_rms_norm -> npu_dynamic_mx_quant(y) becomes
npu_add_rms_norm_dynamic_mx_quant(x1, x2, gamma, epsilon=, scale_alg=, dst_type=).

Bit for bit the chain (the fused operator normalises the fp32 sum and quantises the norm
rounded to x1's dtype, as npu_add_rms_norm returns it). Variants, derived from the
operator's composite (op_sdk/patterns/_mx_norm.py): scale_alg 1 or 0, dst_type and epsilon
spelled or left to their defaults, x_out used or not; rstd unused. Checks: npu_dynamic_mx_quant
quantises the last dim in blocks of 32 with round_mode "rint" and neither dst_type_max nor
max_low_bound; the operator's own rules veto the rest (x1 float16 / bfloat16, gamma 1-D,
scale_alg 0 / 1 for float8 and 0 for float4).
"""

from __future__ import annotations

import torch

from op_sdk.patterns import _mx_norm
from op_sdk.patterns.checks import HALF
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.diagnostics import Check
from op_sdk.patterns.fusion import Fusion

variants = derived_variants("npu_add_rms_norm_dynamic_mx_quant", inputs=("x1", "x2", "gamma"),
                            forms=_mx_norm.forms(("x_out",)), name=_mx_norm.name)


def example_inputs(dtype=torch.bfloat16, variant=None, *, tokens=7, hidden=64, lead=(2,)):
    return _mx_norm.example_inputs(("x1", "x2"), dtype, tokens, hidden, lead)


FUSION = Fusion(
    name="add_rms_norm_dynamic_mx_quant",
    number=10,
    fused_op="npu_add_rms_norm_dynamic_mx_quant",
    unfused_ops=("npu.npu_add_rms_norm", "npu.npu_dynamic_mx_quant"),
    variants=variants,
    example_inputs=example_inputs,
    checks=(Check("mx_last_dim_blocks_of_32", "args", _mx_norm.mx_args),),
    dtypes=HALF,
    torchair_max_autotune=False,
    opaque_to_inductor=True,
    doc=__doc__,
)
