"""Fusion 4: bmm -> transpose(0, 1) becomes npu_transpose_batchmatmul (result (M, B, N)).

TorchAir's four shapes: transpose(bmm), transpose(view(bmm)), and the two where x1 is
itself transposed and expanded before the bmm (``matmul(x1.transpose(0, 1), x2)``), which
become ``perm_x1=[1, 0, 2]``. (After AOTAutograd a 3-D matmul is a bmm; views and expands
of the same shape are what matmul leaves when no-op removal is off.) A fifth,
transpose(bmm(transpose(x1))), is what the expand form becomes after op_sdk's no-op
removal (which also removes same-shape expands); without it the input transpose would
stay a separate strided view in front of a perm_x1=[0, 1, 2] call.

Checks (TorchAir's): bf16 / fp16 / fp32 inputs; the last dim of each bmm input is a
multiple of 128; K < 65536, or 1 <= K*B < 65536 with the input transpose; the views /
expands change nothing; the transposes swap dims 0 and 1 (canonically permute [1, 0, 2]).
TorchAir does not apply it in max-autotune; here it is off in max-autotune unless
``max_autotune_fusions="all"``: bmm and permute are aten ops Inductor already handles
(the permute is a free view it folds into the consumer), so the opaque fused op can only
take optimisations away from it.
"""

from __future__ import annotations

import torch

from op_sdk.patterns.checks import fmt, known, known_multiple, node_of, nodes_of, val
from op_sdk.patterns.derive import derived_variants
from op_sdk.patterns.fusion import Fusion
from op_sdk.patterns.diagnostics import Check

npu, aten = torch.ops.npu, torch.ops.aten

DTYPES = (torch.bfloat16, torch.float16, torch.float32)
KN_ALIGNMENT = 128
LIMIT = 65536


# How x1 reaches the bmm: as it is, or transposed (perm_x1=[1, 0, 2]), possibly through the
# no-op expand / view a 3-D matmul leaves (the composite's x1_view step); and whether a
# no-op view sits between the bmm and the output transpose (its y_view step). The bigger
# patterns first (they contain the smaller ones).
_T = [1, 0, 2]
_FORMS = (
    {"perm_x1": _T, "x1_view": "view(expand)", "y_view": "view"},
    {"perm_x1": _T, "x1_view": "expand"},
    {"perm_x1": _T},
    {"y_view": "view"},
    {},
)


def _name(form: dict) -> str:
    x1 = "x1" if form.get("perm_x1") is None else "transpose(x1)"
    for step in reversed(form["x1_view"].replace(")", "").split("(")):
        x1 = f"{step}({x1})" if step else x1
    inner = "bmm" if x1 == "x1" else f"bmm({x1})"
    return f"transpose(view({inner}))" if form["y_view"] else f"transpose({inner})"


variants = derived_variants("npu_transpose_batchmatmul", rename={"input": "x1", "weight": "x2"},
                            forms=_FORMS, name=_name)


def example_inputs(dtype=torch.float16, variant=None, *, batch=3, m=5, k=128, n=128):
    x1t = variant is not None and "transpose(x1)" in variant.name
    x1 = torch.randn((m, batch, k) if x1t else (batch, m, k), dtype=dtype)
    return {"x1": x1, "x2": torch.randn(batch, k, n, dtype=dtype) / k ** 0.5}


# ---- extra checks ------------------------------------------------------------------------

def _bmm(match):
    return node_of(match, aten.bmm.default)


def _transposes_swap_0_1(match):
    permutes = nodes_of(match, aten.permute.default)
    if any(len(node.args[1]) != 3 for node in permutes):
        return False  # e.g. einsum's 5-D permute after its bmm: not a transpose candidate
    for node in permutes:
        dims = list(node.args[1])
        if dims != [1, 0, 2]:
            return (f"permute{fmt(dims)} is not a transpose of dims 0 and 1; the fused "
                    "operator's perm_y / perm_x1 are [1, 0, 2]")
    return None


def _dtypes(match):
    for i, arg in enumerate(_bmm(match).args):
        v = val(arg)
        if v.dtype not in DTYPES:
            return f"bmm input {i} is {v.dtype}; the fused operator takes bf16 / fp16 / fp32"
    return None


def _alignment(match):
    for i, arg in enumerate(_bmm(match).args):
        last = val(arg).shape[-1]
        if not known_multiple(last, KN_ALIGNMENT):
            return (f"bmm input {i} has last dim {fmt(last)}, not a (statically known) multiple "
                    f"of {KN_ALIGNMENT}")
    return None


def _k_limit(match):
    x1 = val(_bmm(match).args[0])
    b, k = x1.shape[0], x1.shape[2]
    if len(nodes_of(match, aten.permute.default)) >= 2:  # x1 is transposed too
        if not (known(k * b >= 1) and known(k * b < LIMIT)):
            return f"K*B = {fmt(k * b)} is not known to be in [1, {LIMIT}) (perm_x1=[1, 0, 2])"
    elif not known(k < LIMIT):
        return f"K = {fmt(k)} is not known to be < {LIMIT}"
    return None


def _views_are_noops(match):
    from torch._inductor.fx_passes.post_grad import same_meta

    for node in nodes_of(match, aten.reshape.default) + nodes_of(match, aten.expand.default):
        if not same_meta(node.args[0], node):
            return (f"{node.target._opname} {node.name} changes {fmt(val(node.args[0]).shape)} "
                    f"into {fmt(val(node).shape)}; only no-op views / expands fuse")
    return None


CHECKS = (
    Check("transpose_dims_0_1", "args", _transposes_swap_0_1),
    Check("dtypes", "dtype", _dtypes),
    Check("kn_alignment_128", "alignment", _alignment),
    Check("k_limit", "shape", _k_limit),
    Check("noop_views", "shape", _views_are_noops),
)

FUSION = Fusion(
    name="transpose_batchmatmul",
    number=4,
    fused_op="npu_transpose_batchmatmul",
    unfused_ops=("aten.bmm", "aten.permute"),
    variants=variants,
    example_inputs=example_inputs,
    checks=CHECKS,
    dtypes=(torch.float16, torch.bfloat16, torch.float32),
    torchair_max_autotune=False,
    opaque_to_inductor=False,
    doc=__doc__,
)
