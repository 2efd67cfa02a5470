"""Fusion 7 (op_sdk's; not in TorchAir's table): npu_add_rms_norm -> y + beta ->
npu_quantize(div_mode=True, axis=-1) becomes npu_add_rms_norm_quant(..., beta=beta) (y1 and
x_out), the bias form of fusion 5 (vllm-ascend's AddRMSNormQuantWithBias, whose pattern
quantises by multiplying with the reciprocal scale, ``div_mode=False``: that spelling is not
this fusion's, whose operator divides).

Variants derived from the operator's ``composite=`` with ``beta`` a pattern input: with /
without an explicit epsilon, x_out used / unused. Checks: fusion 5's, plus the bias of
gamma's shape and dtype (npu_add_rms_norm_quant's rule for beta). The fused operator adds the
bias to the float32 normalised value before quantising; the unfused chain adds it to y rounded
to x's dtype and rounds the sum: int8 results may differ by one step where a value sits on a
rounding boundary (the tolerance verify_replacement checks).
"""

from __future__ import annotations

import torch

from op_sdk.patterns import add_rms_norm_quant as f5
from op_sdk.patterns.checks import HALF, fmt, node_of, val
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.diagnostics import Check
from op_sdk.patterns.fusion import Fusion

aten = torch.ops.aten

variants = derived_variants(
    "npu_add_rms_norm_quant", grid=("x_out", "epsilon"),
    inputs=("x1", "x2", "gamma", "scales1", "zero_points1", "beta"),
    rename={"scales1": "scales", "zero_points1": "zero_points"})


def example_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    inputs = f5.example_inputs(dtype, variant, tokens=tokens, hidden=hidden, lead=lead)
    inputs["beta"] = (torch.randn(hidden) * 0.1).to(dtype)
    return inputs


def _beta(match):
    add = node_of(match, aten.add.Tensor)
    gamma = val(f5._norm(match).args[2])
    # the add's operand from outside the match (the other is the norm's y)
    b = val(next(a for a in add.args if isinstance(a, torch.fx.Node) and a not in match.nodes))
    if tuple(b.shape) != tuple(gamma.shape) or b.dtype != gamma.dtype:
        return (f"the bias is {fmt(b.shape)} {b.dtype}; npu_add_rms_norm_quant takes beta of "
                f"gamma's shape and dtype ({fmt(gamma.shape)} {gamma.dtype})")
    return None


FUSION = Fusion(
    name="add_rms_norm_quant_bias",
    number=7,
    fused_op="npu_add_rms_norm_quant",
    unfused_ops=("npu.npu_add_rms_norm", "npu.npu_quantize"),
    variants=variants,
    example_inputs=example_inputs,
    checks=f5.CHECKS + (Check("beta_is_gamma_shaped", "shape", _beta),),
    dtypes=HALF,
    torchair_max_autotune=False,
    opaque_to_inductor=True,
    doc=__doc__,
)
