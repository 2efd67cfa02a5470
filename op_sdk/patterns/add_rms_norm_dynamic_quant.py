"""Fusion 1: npu_add_rms_norm -> npu_dynamic_quant(y, smooth_scales) becomes
npu_add_rms_norm_dynamic_quant(..., smooth_scale1, output_mask=[True, False]).

Outputs kept: the quantised y (y1), the per-token scale (scale1) and, when used, the sum
x_out. Four variants, derived from the operator's ``composite=`` (``derived_variants``):
with / without an explicit epsilon, x_out used / unused. rstd must
be unused (the fused operator does not return it); that is the pattern's user count.
The fused kernel quantises the fp32 normalised value instead of its fp16 / bf16 rounding,
so the int8 result may differ from the unfused one by one step (the contract's choice).
"""

from __future__ import annotations

import torch

from op_sdk.patterns.checks import HALF, fmt, half_inputs, node_of, val
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.fusion import Fusion
from op_sdk.patterns.diagnostics import Check

npu = torch.ops.npu

# The variants come from npu_add_rms_norm_dynamic_quant's composite (op_sdk/ops/): x_out
# used / unused, epsilon left to its default / explicit. The pattern's smooth input keeps
# the name of npu_dynamic_quant's argument.
variants = derived_variants("npu_add_rms_norm_dynamic_quant",
                            inputs=("x1", "x2", "gamma", "smooth_scale1"),
                            rename={"smooth_scale1": "smooth_scales"}, grid=("x_out", "epsilon"))


def example_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    shape = (*lead, tokens, hidden)
    return {"x1": torch.randn(shape, dtype=dtype), "x2": torch.randn(shape, dtype=dtype),
            "gamma": torch.randn(hidden, dtype=dtype),
            "smooth_scales": torch.rand(hidden, dtype=dtype) + 0.5, "epsilon": 1e-5}


# ---- extra checks ------------------------------------------------------------------------

def dynamic_quant_is_int8_per_token(dq: torch.fx.Node, smooth_allowed: bool) -> str | None:
    """The pattern ignores npu_dynamic_quant's other arguments; the fused op computes only
    the int8 per-token form (and the flatten fusion has no smooth input at all)."""
    if dq is None:
        return None
    kw = dq.kwargs
    bad = []
    if kw.get("group_index") is not None:
        bad.append("group_index (MoE grouping)")
    if kw.get("dst_type") not in (None, 1, torch.int8):
        bad.append(f"dst_type={kw['dst_type']}")
    if kw.get("quant_mode", "pertoken") != "pertoken":
        bad.append(f"quant_mode={kw['quant_mode']!r}")
    if kw.get("dst_type_max", 0.0) != 0.0:
        bad.append(f"dst_type_max={kw['dst_type_max']}")
    if not smooth_allowed and kw.get("smooth_scales") is not None:
        bad.append("smooth_scales (this fusion has no smooth input)")
    if bad:
        return ("npu_dynamic_quant is called with " + ", ".join(bad)
                + "; the fused operator computes int8 per-token quantisation only")
    return None


def _dq_args(match):
    return dynamic_quant_is_int8_per_token(node_of(match, npu.npu_dynamic_quant.default), True)


def _norm(match):
    return node_of(match, npu.npu_add_rms_norm.default)


def _dtypes(match):
    norm = _norm(match)
    problem = half_inputs(norm.args[0], norm.args[1])
    if problem:
        return problem
    smooth = node_of(match, npu.npu_dynamic_quant.default).kwargs.get("smooth_scales")
    if smooth is not None and val(smooth).dtype != val(norm.args[0]).dtype:
        return (f"smooth_scales is {val(smooth).dtype} but x1 is {val(norm.args[0]).dtype}; "
                "the fused operator takes them in one dtype")
    return None


def _gamma_1d(match):
    gamma = val(_norm(match).args[2])
    if gamma.dim() != 1:
        return (f"gamma has shape {fmt(gamma.shape)}; the fused operator normalises over the "
                "last dim only (1-D gamma)")
    return None


CHECKS = (
    Check("dynamic_quant_int8_per_token", "args", _dq_args),
    Check("half_dtypes", "dtype", _dtypes),
    Check("gamma_1d", "shape", _gamma_1d),
)

FUSION = Fusion(
    name="add_rms_norm_dynamic_quant",
    number=1,
    fused_op="npu_add_rms_norm_dynamic_quant",
    unfused_ops=("npu.npu_add_rms_norm", "npu.npu_dynamic_quant"),
    variants=variants,
    example_inputs=example_inputs,
    checks=CHECKS,
    dtypes=HALF,
    torchair_max_autotune=True,
    opaque_to_inductor=True,
    doc=__doc__,
)
