"""Fusion 3: npu_add_rms_norm -> y.view(-1, h) -> cast to float32 becomes
npu_add_rms_norm_cast, then view(-1, h) on its float32 output y1.

Variants (derived from the operator's ``composite=``): the cast spelled ``npu._npu_dtype_cast`` (torch_npu's lowering of ``.to()``)
or ``.to()`` (``aten._to_copy`` / ``prims.convert_element_type``: one canonical
spelling), with or without the view, with or without an explicit epsilon, x_out used or
not: 16. y itself stays available (the fused op's y2). The checks: the cast really goes
to float32 and h really is x1's last dim (symbolic sizes allowed).
"""  # noqa: E501

from __future__ import annotations

import torch

from op_sdk.patterns.checks import HALF, fmt, half_inputs, node_of, same, val
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.fusion import Fusion
from op_sdk.patterns.diagnostics import Check

npu, aten, prims = torch.ops.npu, torch.ops.aten, torch.ops.prims

# The variants come from npu_add_rms_norm_cast's composite (op_sdk/ops/): the cast's two
# spellings, with / without the view, epsilon default / explicit, x_out used / unused.
variants = derived_variants("npu_add_rms_norm_cast")


def example_inputs(dtype=torch.float16, variant=None, *, tokens=7, hidden=32, lead=(2,)):
    shape = (*lead, tokens, hidden)
    return {"x1": torch.randn(shape, dtype=dtype), "x2": torch.randn(shape, dtype=dtype),
            "gamma": torch.randn(hidden, dtype=dtype), "epsilon": 1e-5}


# ---- extra checks ------------------------------------------------------------------------

_CAST_TARGETS = (npu._npu_dtype_cast.default, prims.convert_element_type.default)


def _cast(match):
    return next(n for n in match.nodes if n.target in _CAST_TARGETS)


def _to_float32(match):
    dtype = _cast(match).args[1]
    if dtype != torch.float32:
        return f"the cast goes to {dtype}; the fused operator's y1 is float32"
    return None


def _view_is_last_dim(match):
    src = _cast(match).args[0]
    if src.target != aten.reshape.default:
        return None  # the variant without the view
    x1 = val(node_of(match, npu.npu_add_rms_norm.default).args[0])
    out = val(src)
    if out.dim() != 2 or not same(out.shape[1], x1.shape[-1]):
        return (f"the view maps {fmt(val(src.args[0]).shape)} to {fmt(out.shape)}, not "
                f"(-1, h) with h = x1's last dim {fmt(x1.shape[-1])}")
    return None


def _dtypes(match):
    norm = node_of(match, npu.npu_add_rms_norm.default)
    return half_inputs(norm.args[0], norm.args[1])


CHECKS = (
    Check("cast_to_float32", "dtype", _to_float32),
    Check("view_is_last_dim", "shape", _view_is_last_dim),
    Check("half_dtypes", "dtype", _dtypes),
)

FUSION = Fusion(
    name="add_rms_norm_cast",
    number=3,
    fused_op="npu_add_rms_norm_cast",
    unfused_ops=("npu.npu_add_rms_norm",),
    variants=variants,
    example_inputs=example_inputs,
    checks=CHECKS,
    dtypes=HALF,
    torchair_max_autotune=True,
    opaque_to_inductor=True,
    doc=__doc__,
)
