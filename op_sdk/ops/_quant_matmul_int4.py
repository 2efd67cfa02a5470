"""npu_quant_matmul's int4 forms (op_sdk/ops/quant_matmul.py): A4W4, per-group A4W4 and
A8W4 (int32-packed int4 weights), their rules and references."""

from __future__ import annotations

import torch

from op_sdk.ops._common import (
    BFLOAT16,
    FLOAT16,
    INT8,
    check,
    dtype_arg,
    dtype_value_str,
    unpack_int4,
    unpack_quant_scale,
    unsupported,
)
from op_sdk.ops._quant_matmul_common import _OUT_DTYPES, _none_outside_subset


# ---- int4 weights (int32-packed: 8 values per int32, element 0 in the lowest nibble)
#
# A4W4: x1 int32 (m, k/8) and x2 int32, either (k, n/8) packed along n, or the "continuous
# x2" layout: the transpose view (k/8, n) of an (n, k/8) tensor packed along k (which of
# the two is told by shape, as torch_npu's Meta does: x2.size(-2) == x1.size(-1) is the
# transposed one). The product is the int8 one on the unpacked values; the epilogue is
# the int8 path's (without pertoken_scale the output must be float16, as on the NPU).
# A8W4 (per-group, K-G): x1 int8 (m, k), x2 int32 (k, n/8), scale (k/256, n) per group of
# 256 rows of k (int64 as npu_trans_quant_param packs it, or float32), pertoken_scale
# (m, 1), offset (n,) float32 (the y offset), float16 / bfloat16 output. The NPU multiplies
# x1 - 8 (it splits x1 into a signed high nibble and its low nibble minus 8), which the
# documented y offset, 8 * sum_k x2 * scale, cancels:
#   out = (sum_g scale[g] * ((x1[:, g] - 8) @ x2[g, :]) + offset) * pertoken_scale
# summed in fp32 over the groups in order, each group's product exact in int32 (computed
# as x1 @ x2 - 8 * the column sums of x2).

A8W4_GROUP = 256

# Per-group A4W4 (K-G, torch_npu's "int32 | int32 | float32 | float16 | None | float32 |
# bfloat16/float16" row): x1 int32 (m, k/8), x2 int32 in either A4W4 layout, a 2-D `scale`
# (ceil(k/256), n) float32 (one row per group of 256 rows of k; a 2-D scale is what selects
# this form), `offset` float16 of scale's shape (the weight's per-group zero point, required),
# `pertoken_scale` (m, 1) float32 (required), no bias, float16 / bfloat16 output,
# group_sizes [0, 0, 256] or [1, 1, 256] (0 in m or n means the size the shapes give, 1).
#   out = (sum_g fp32(x1[:, g] @ (x2[g, :] - offset[g])) * scale[g]) * pertoken_scale
# Each group's value is exact (x1[:, g] @ x2[g, :] in int32, minus the row sums of x1[:, g]
# times the float16 offset, computed exactly in fp64: an int32 product for integral zero
# points) and rounded once to fp32; the scaled groups are summed in fp32 in order. The last
# group is shorter when 256 does not divide k (the documented ceil(k/256) rows of scale).
A4W4_GROUP = 256


def _is_a4w4(x1, x2):
    return x1.dtype == torch.int32 and x2.dtype == torch.int32


def _is_a8w4(x1, x2):
    return x1.dtype == torch.int8 and x2.dtype == torch.int32


def _a4w4_shapes(x1, x2, op="npu_quant_matmul"):
    """(k, n, transposed x2) of an A4W4 call."""
    check(x1.dim() >= 2, op, "x1", f"must have at least 2 dims (m, k/8), got {x1.dim()}")
    check(x2.dim() == 2, op, "x2", f"must be 2-D for int4 (int32-packed) weights, got {x2.dim()} dims")
    k = x1.shape[-1] * 8
    if x2.shape[0] == x1.shape[-1]:
        return k, x2.shape[1], True
    check(x2.shape[0] == k, op, "x2", f"must be (k, n/8) = ({k}, n/8) packed along n, or the "
          f"transpose of an (n, k/8) = (n, {k // 8}) tensor packed along k, got {list(x2.shape)}")
    return k, x2.shape[1] * 8, False


def _a4w4_unpack(x1, x2):
    _, _, transposed = _a4w4_shapes(x1, x2)
    w = unpack_int4(x2.t()).t() if transposed else unpack_int4(x2)
    return unpack_int4(x1), w


def _check_a4w4(x1, x2, pertoken_scale, output_dtype, bias=None):
    op = "npu_quant_matmul"
    _a4w4_shapes(x1, x2)
    if bias is not None:
        check(bias.dim() == 1, op, "bias", f"must be 1-D (n,) with int4 x1 and x2, got shape "
              f"{list(bias.shape)}")
    code = dtype_arg(op, "output_dtype", output_dtype, tuple(_OUT_DTYPES), INT8)
    if pertoken_scale is None:
        check(code == FLOAT16, op, "output_dtype",
              f"must be float16 for int4 x1 and x2 without pertoken_scale, got "
              f"{dtype_value_str(output_dtype)}")


def a4w4_int8_like(x1, x2, pertoken_scale, output_dtype, bias):
    """The A4W4 (per-channel) form's own rules, then empty int8 operands of its unpacked
    shapes, which the int8 form's rules read, and whether x2 is the (k/8, n) view packed
    along k."""
    _check_a4w4(x1, x2, pertoken_scale, output_dtype, bias)
    k, n, transposed = _a4w4_shapes(x1, x2)
    return (x1.new_empty((*x1.shape[:-1], k), dtype=torch.int8),
            x2.new_empty((k, n), dtype=torch.int8), transposed)


def _is_a4w4_per_group(x1, x2, scale):
    return _is_a4w4(x1, x2) and scale.dim() == 2


def check_a4w4_per_group(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                         x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes,
                         y_scale):
    """Returns (output code, k, n, groups)."""
    op = "npu_quant_matmul"
    _none_outside_subset(op, x1_dtype=x1_dtype, x2_dtype=x2_dtype,
                         pertoken_scale_dtype=pertoken_scale_dtype, scale_dtype=scale_dtype,
                         y_scale=y_scale)
    check(x1.dim() == 2, op, "x1", f"must be 2-D (m, k/8) with int4 x1 and x2 and a per-group "
          f"(2-D) scale, got {x1.dim()} dims")
    k, n, _ = _a4w4_shapes(x1, x2)
    m = x1.shape[0]
    g = A4W4_GROUP
    check(group_sizes is not None and len(group_sizes) == 3 and group_sizes[0] in (0, 1)
          and group_sizes[1] in (0, 1) and group_sizes[2] == g, op, "group_sizes",
          f"must be [0, 0, {g}] or [1, 1, {g}] (one scale row per {g} rows of k) with int4 x1 "
          f"and x2 and a per-group (2-D) scale, got "
          f"{None if group_sizes is None else list(group_sizes)}")
    groups = -(-k // g)
    check(scale.dtype == torch.float32 and list(scale.shape) == [groups, n], op, "scale",
          f"must be float32 of shape (ceil(k/{g}), n) = ({groups}, {n}) with int4 x1 and x2 "
          f"per group, got {scale.dtype} {list(scale.shape)}")
    check(offset is not None, op, "offset", "is required with int4 x1 and x2 and a per-group "
          "(2-D) scale (the weight's float16 zero points, shaped like scale)")
    check(offset.dtype == torch.float16 and list(offset.shape) == [groups, n], op, "offset",
          f"must be float16 of scale's shape ({groups}, {n}) with int4 x1 and x2 per group, "
          f"got {offset.dtype} {list(offset.shape)}")
    check(pertoken_scale is not None, op, "pertoken_scale",
          "is required with int4 x1 and x2 and a per-group (2-D) scale")
    check(pertoken_scale.dtype == torch.float32 and list(pertoken_scale.shape) == [m, 1], op,
          "pertoken_scale", f"must be float32 of shape (m, 1) = ({m}, 1) with int4 x1 and x2 "
          f"per group, got {pertoken_scale.dtype} {list(pertoken_scale.shape)}")
    check(bias is None, op, "bias", f"must be None with int4 x1 and x2 and a per-group (2-D) "
          f"scale, got {None if bias is None else bias.dtype} "
          f"{None if bias is None else list(bias.shape)}")
    code = dtype_arg(op, "output_dtype", output_dtype, (FLOAT16, BFLOAT16), None)
    return code, k, n, groups


def _a4w4_per_group_reference(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                              group_sizes, y_scale):
    code, k, n, groups = check_a4w4_per_group(
        x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype, x2_dtype,
        pertoken_scale_dtype, scale_dtype, group_sizes, y_scale)
    x, w = _a4w4_unpack(x1, x2)
    out = x.new_zeros((x.shape[0], n), dtype=torch.float32)
    for g in range(groups):
        rows = slice(g * A4W4_GROUP, min(k, (g + 1) * A4W4_GROUP))
        xg = x[:, rows].double()
        # fp64 holds every term exactly: the int32 product, the row sums times the float16
        # zero point and their difference
        acc = torch.matmul(xg, w[rows].double())
        val = acc - xg.sum(1, keepdim=True) * offset[g].double()
        out = out + val.float() * scale[g]
    return (out * pertoken_scale).to(_OUT_DTYPES[code])


def check_a8w4(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes):
    """Returns (output code, k, n, groups)."""
    op = "npu_quant_matmul"
    check(x1.dim() == 2, op, "x1", f"must be 2-D (m, k) with int4 weights, got {x1.dim()} dims")
    check(x2.dim() == 2, op, "x2", f"must be 2-D (k, n/8) int32 (int4 packed), got {x2.dim()} dims")
    m, k = x1.shape
    check(x2.shape[0] == k, op, "x2", f"must have k = {k} rows, got {list(x2.shape)}")
    n = x2.shape[1] * 8
    check(k % A8W4_GROUP == 0, op, "x1", f"k must be a multiple of {A8W4_GROUP} with int4 "
          f"weights (one scale per {A8W4_GROUP} rows of k), got {k}")
    groups = k // A8W4_GROUP
    if group_sizes is not None:
        check(len(group_sizes) == 3 and group_sizes[2] == A8W4_GROUP, op, "group_sizes",
              f"must be [0, 0, {A8W4_GROUP}] (or None) with int4 weights, got {list(group_sizes)}")
    check(scale.dtype in (torch.int64, torch.float32) and list(scale.shape) == [groups, n], op,
          "scale", f"must be int64 (npu_trans_quant_param's packed value) or float32 of shape "
          f"(k/{A8W4_GROUP}, n) = ({groups}, {n}), got {scale.dtype} {list(scale.shape)}")
    check(pertoken_scale is not None, op, "pertoken_scale", "is required with int4 weights")
    check(pertoken_scale.dtype == torch.float32 and pertoken_scale.dim() == 2
          and list(pertoken_scale.shape) == [m, 1], op, "pertoken_scale",
          f"must be float32 of shape (m, 1) = ({m}, 1) with int4 weights, got "
          f"{pertoken_scale.dtype} {list(pertoken_scale.shape)}")
    if offset is not None:
        check(offset.dtype == torch.float32 and list(offset.shape) == [n], op, "offset",
              f"must be float32 of shape (n,) = ({n},), got {offset.dtype} {list(offset.shape)}")
    if bias is not None:
        unsupported(op, "bias", "is not supported with int8 x1 and int4 weights (use offset)")
    code = dtype_arg(op, "output_dtype", output_dtype, (FLOAT16, BFLOAT16), None)
    return code, k, n, groups


def _a8w4_reference(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes):
    code, k, n, groups = check_a8w4(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                    group_sizes)
    w = unpack_int4(x2)
    s = unpack_quant_scale(scale)
    out = torch.zeros(x1.shape[0], n)
    for g in range(groups):
        rows = slice(g * A8W4_GROUP, (g + 1) * A8W4_GROUP)
        acc = (torch.matmul(x1[:, rows].double(), w[rows].double())
               - 8 * w[rows].double().sum(0)).to(torch.int32)
        out = out + acc.float() * s[g]
    if offset is not None:
        out = out + offset
    return (out * pertoken_scale).to(_OUT_DTYPES[code])
