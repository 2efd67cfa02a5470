"""Fusion 2: npu_add_rms_norm -> y.flatten(0, 1) -> npu_dynamic_quant (no smooth) ->
scale.view(-1, 1) becomes npu_add_rms_norm_dynamic_quant(output_mask=[True, False]),
then flatten(0, 1) on y1 and view(-1, 1) on scale1.

Variants (derived from the operator's ``composite=``, as fusion 1's, with its y_view /
scale_view steps spelled as the flatten and the column view): with / without an
explicit epsilon, x_out used / unused. The pattern ignores
the view sizes (they are symbolic under dynamic shapes); the checks establish that the
view on y really is flatten(0, 1) (y has x1's rank, the view drops one dim, its first dim
is dim0 * dim1 and the rest are unchanged) and that the scale view is a (-1, 1) column.
"""

from __future__ import annotations

import torch

from op_sdk.patterns import add_rms_norm_dynamic_quant as f1
from op_sdk.patterns.checks import HALF, fmt, known, node_of, nodes_of, prod, same, val
from op_sdk.composite import Spelling
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.fusion import Fusion
from op_sdk.patterns.diagnostics import Check

npu, aten = torch.ops.npu, torch.ops.aten


def _flatten_0_1(t):
    return t.flatten(0, 1)


def _column(t):
    return t.view(-1, 1)


# No smooth input; y is flattened before the quantisation (so y1 after the fused op),
# the scale viewed as a column after it (in both).
variants = derived_variants(
    "npu_add_rms_norm_dynamic_quant", inputs=("x1", "x2", "gamma"), grid=("x_out", "epsilon"),
    spellings={"y_view": {"": Spelling(_flatten_0_1, outputs={"y1": _flatten_0_1})},
               "scale_view": {"": Spelling(_column, outputs={"scale1": _column})}})


def example_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    shape = (*lead, tokens, hidden)
    return {"x1": torch.randn(shape, dtype=dtype), "x2": torch.randn(shape, dtype=dtype),
            "gamma": torch.randn(hidden, dtype=dtype), "epsilon": 1e-5}


# ---- extra checks ------------------------------------------------------------------------

def _dq_args(match):
    return f1.dynamic_quant_is_int8_per_token(node_of(match, npu.npu_dynamic_quant.default),
                                              smooth_allowed=False)


def _y_view_is_flatten(match):
    norm = node_of(match, npu.npu_add_rms_norm.default)
    dq = node_of(match, npu.npu_dynamic_quant.default)
    view = dq.args[0]
    x1, y, out = val(norm.args[0]), val(view.args[0]), val(view)
    if y.dim() != x1.dim():
        return f"y has {y.dim()} dims, x1 has {x1.dim()}"
    if y.dim() < 3:
        return (f"y has shape {fmt(y.shape)}; flatten(0, 1) of it leaves fewer than the 2 dims "
                "the fused operator's outputs need")
    want = [y.shape[0] * y.shape[1], *y.shape[2:]]
    if out.dim() != y.dim() - 1 or not same(list(out.shape), want):
        return (f"the view before npu_dynamic_quant maps {fmt(y.shape)} to {fmt(out.shape)}, "
                f"not flatten(0, 1) = {fmt(want)}")
    return None


def _scale_view_is_column(match):
    dq = node_of(match, npu.npu_dynamic_quant.default)
    views = [n for n in nodes_of(match, aten.reshape.default) if n is not dq.args[0]]
    if not views:
        return None
    view = views[0]
    scale, out = val(view.args[0]), val(view)
    if out.dim() != 2 or not known(out.shape[1] == 1) or not same(out.shape[0],
                                                                  prod(list(scale.shape))):
        return f"the view of the scale maps {fmt(scale.shape)} to {fmt(out.shape)}, not (-1, 1)"
    return None


CHECKS = (
    Check("dynamic_quant_int8_per_token", "args", _dq_args),
    Check("y_view_is_flatten_0_1", "shape", _y_view_is_flatten),
    Check("scale_view_is_column", "shape", _scale_view_is_column),
    Check("half_dtypes", "dtype", f1._dtypes),
    Check("gamma_1d", "shape", f1._gamma_1d),
)

FUSION = Fusion(
    name="add_rms_norm_dynamic_quant_flatten",
    number=2,
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
