"""npu_quant_matmul: int8 x int8, int4 x int4 (per channel or per group of k), int8 x
int4 (per-group) and float8 / HiFloat8 matmul with per-channel / per-token dequantisation,
and per-block (G-B / B-B) scales for int8 / float8 / HiFloat8.

Native CPU kernel: csrc/quant_matmul.cpp (over kernels/quant_matmul.h): an exact int8
product (an AVX-512 VNNI kernel reading (n, k) weights in place for few-row inputs, ATen's
int8 GEMM otherwise) with the dequantisation fused into one pass over the output. The
per-group forms (A8W4, per-group A4W4) take the same exact product one group of 256 rows
of k at a time and accumulate the scaled groups in fp32, in order.
"""

from __future__ import annotations

import torch

from op_sdk.library import Benchmark, define_op
from op_sdk.npu import prototypes
from op_sdk.npu.binding import AclnnBinding
from op_sdk.ops._common import (
    BFLOAT16,
    FLOAT16,
    FLOAT32,
    INT32,
    INT8,
    check,
    dtype_arg,
    dtype_value_str,
    quantize_s9,
    requantize_int8,
    unpack_int4,
    unpack_quant_offset,
    unpack_quant_scale,
    unsupported,
)
from op_sdk.ops._formats import (
    FLOAT4_E2M1,
    HIFLOAT8,
    fp4_codes_to_float,
    hif8_to_float,
    unpack_nibbles,
)


_OUT_DTYPES = {INT8: torch.int8, INT32: torch.int32, FLOAT16: torch.float16,
               BFLOAT16: torch.bfloat16}
_FLOAT_BIAS = (torch.float16, torch.bfloat16, torch.float32)
_PACKED_SCALE = (torch.int64, torch.uint64)


def _none_outside_subset(op, **given):
    """The optional arguments outside the supported subset: each must be None."""
    for name, v in given.items():
        if v is not None:
            unsupported(op, name, "is outside the supported subset (must be None)")


def _matmul_shapes(op, x1, x2):
    """The (m, k) x (k, n) product's shapes: at least 2 dims each, the same k, batch dims
    that broadcast. Returns (m, n, the broadcast batch dims)."""
    check(x1.dim() >= 2, op, "x1", f"must have at least 2 dims (m, k), got {x1.dim()}")
    check(x2.dim() >= 2, op, "x2", f"must have at least 2 dims (k, n), got {x2.dim()}")
    k, k2 = x1.shape[-1], x2.shape[-2]
    check(k == k2, op, "x2", f"must have k = {k} rows (x1 is (m, k)), got {k2}")
    return x1.shape[-2], x2.shape[-1], _batch_dims(op, x1, x2)


def _batch_dims(op, x1, x2):
    """The broadcast batch dims of x1 and x2 (all but their last two)."""
    try:
        return torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    except RuntimeError:
        check(False, op, "x2", f"batch dims must broadcast with x1's: {list(x1.shape[:-2])} vs "
              f"{list(x2.shape[:-2])}")


def _broadcasts_to(lead, batch):
    """Whether batch dims `lead` broadcast to `batch` (the output's, which they may not grow)."""
    return len(lead) <= len(batch) and all(
        a in (1, b) for a, b in zip(reversed(list(lead)), reversed(list(batch))))


def _group_sizes(op, group_sizes, dims, scale_dims):
    """(the group_sizes given, [gsM, gsN, gsK]): None counts as [0, 0, 0], and a 0 is inferred
    as CANN infers it, the dim (m, n, k) over the scale's dim when it divides (else -1, which
    no form accepts)."""
    gs = [0, 0, 0] if group_sizes is None else list(group_sizes)
    check(len(gs) == 3, op, "group_sizes", f"must have 3 values [gsM, gsN, gsK], got {gs}")
    given = list(gs)
    for i, (d, sd) in enumerate(zip(dims, scale_dims)):
        if gs[i] == 0:
            gs[i] = d // sd if sd and d % sd == 0 else -1
    return given, gs


def _check_bias_shape(op, x1, x2, bias, n):
    """bias (n,), or (batch, 1, n) with a 3-D output: one bias row per batch (torch_npu's
    documented form)."""
    batch = list(torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]))
    if bias.dim() == 3:
        check(len(batch) == 1 and list(bias.shape) == [batch[0], 1, n], op, "bias",
              f"of 3 dims must have shape (batch, 1, n) = "
              f"({batch[0] if len(batch) == 1 else 'batch'}, 1, {n}) with a 3-D output "
              f"(batch dims {batch}), got {list(bias.shape)}")
    else:
        check(bias.dim() == 1 and bias.shape[0] == n, op, "bias",
              f"must have shape (n,) = ({n},) or (batch, 1, n), got {list(bias.shape)}")


# int8 x1 / x2 with an int64 / uint64 scale (1,) or (n,): the value npu_trans_quant_param
# returns, torch_npu's A8W8 usage. CANN's aclnnQuantMatmulV4 (hicann/ops-nn @
# 8ac78fb1700262c7c7a97f36b58fe587b9917c8a, matmul/quant_batch_matmul_v3/docs/
# aclnnQuantMatmulV4_en.md, the data type combinations) documents for INT8 x INT8 with scale
# UINT64 / INT64: no pertokenScale, bias null / INT32, out FLOAT16 (BFLOAT16 too on Ascend
# 950) with offset null, or out INT8 with offset null / FLOAT32; out = (x1@x2 + bias) *
# scale (+ offset). op-plugin's kernel (Ascend/op-plugin @
# 020d41797e45fe379b97690a5d6443ae7e40fdd0, op_plugin/ops/opapi/QuantMatmulKernelNpuOpApi.cpp)
# passes such a scale to aclnnQuantMatmulV5 unchanged (x2Scale), with the offset tensor as
# x2Offset; torch_npu 2.13.0's Meta (quant_matmul_scale_offset_out_check) refuses an int32
# output with it. op_sdk: out = (x1 @ x2 + bias) * unpack_quant_scale(scale) in fp32, one
# rounding to a float output. Refused: int32 output (as the Meta); outside the subset (CANN
# documents no row, the Meta answers): pertoken_scale, a float bias.
#
# The int8 output (both scale forms) is CANN's requantisation (the fixpipe's; ops-nn's kernel
# golden, qbmmv3_kernel_golden.py compute_requant, at the ops-nn commit of _common.py's
# requantize_int8): quantize_s9(fp32(acc + bias) * scale) + the s9 offset, saturated to int8.
# - An int64 / uint64 scale: the offset is the one npu_trans_quant_param packed in it (bits
#   37..45; zero when it packed none). An `offset` tensor beside it is checked (float32, (1,)
#   or (n,)) and not read: no QuantBatchMatmulV3 kernel reads its offset input (ops-nn
#   @ e5c3fa93, op_kernel/quant_batch_matmul_v3.cpp and arch35/: Init takes no offset, or
#   drops it), and torch_npu's documentation passes both, npu_trans_quant_param(scale,
#   offset) and offset, in its graph example.
# - A float32 scale with an `offset` tensor: op-plugin packs both with npu_trans_quant_param
#   before the call (csrc/npu/binding.h's quant_matmul_scale), so the NPU adds
#   quantize_s9(offset); op_sdk does the same with the scale at full precision, so that
#   npu_quant_matmul(x1, x2, s, offset=o) equals npu_quant_matmul(x1, x2,
#   pack_quant_scale(s, o)) whenever s has 19 significant bits (torch_npu's documented
#   "Method 1" and "Method 2").
# A float output reads no offset.

def check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                       x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale,
                       op="npu_quant_matmul"):
    """Returns the output dtype code. Everything outside the subset is NotImplementedError."""
    _none_outside_subset(op, x1_dtype=x1_dtype, x2_dtype=x2_dtype,
                         pertoken_scale_dtype=pertoken_scale_dtype, scale_dtype=scale_dtype,
                         group_sizes=group_sizes, y_scale=y_scale)
    if x1.dtype != torch.int8:
        unsupported(op, "x1", f"must be int8 (the supported subset), got {x1.dtype}")
    if x2.dtype != torch.int8:
        unsupported(op, "x2", f"must be int8 (the supported subset), got {x2.dtype}")
    code = dtype_arg(op, "output_dtype", output_dtype, tuple(_OUT_DTYPES), INT8)
    m, n, _ = _matmul_shapes(op, x1, x2)
    check(scale.dim() == 1 and scale.shape[0] in (1, n), op, "scale",
          f"must have shape (1,) or (n,) = ({n},), got {list(scale.shape)}")
    packed = scale.dtype in _PACKED_SCALE
    check(packed or scale.dtype in (torch.float32, torch.bfloat16), op, "scale",
          f"must be float32, bfloat16, or int64 / uint64 (npu_trans_quant_param's packed "
          f"value), got {scale.dtype}")
    if packed:
        check(code != INT32, op, "output_dtype",
              "must be int8, float16 or bfloat16 with an int64 / uint64 scale, got int32")
        if pertoken_scale is not None:
            unsupported(op, "pertoken_scale", "with an int64 / uint64 scale is outside the "
                        "supported subset (CANN documents a per-token scale with a float32 "
                        "scale only)")
    if scale.dtype == torch.bfloat16:
        # torch_npu 2.13.0's Meta and CANN's checker (an int8 output needs an int64 / uint64
        # scale on the NPU; op-plugin packs float32 scales only)
        check(code in (BFLOAT16, INT32), op, "output_dtype",
              f"must be bfloat16 or int32 with a bfloat16 scale, got {dtype_value_str(code)}")
    if pertoken_scale is not None:
        check(pertoken_scale.dtype == torch.float32, op, "pertoken_scale",
              f"must be float32, got {pertoken_scale.dtype}")
        check(pertoken_scale.dim() == 1 and pertoken_scale.shape[0] == m, op,
              "pertoken_scale", f"must have shape (m,) = ({m},), got "
              f"{list(pertoken_scale.shape)}")
        if code not in (FLOAT16, BFLOAT16):
            unsupported(op, "pertoken_scale", "requires output_dtype float16 or bfloat16")
    if offset is not None:
        if code != INT8:
            unsupported(op, "offset", "requires output_dtype int8")
        check(offset.dtype == torch.float32 and offset.dim() == 1
              and offset.shape[0] in (1, n), op, "offset",
              f"must be float32 of shape (1,) or ({n},), got {offset.dtype} "
              f"{list(offset.shape)}")
    if bias is not None:
        _check_bias_shape(op, x1, x2, bias, n)
        if bias.dtype in _FLOAT_BIAS:
            if pertoken_scale is None:
                unsupported(op, "bias", "of a float dtype requires pertoken_scale")
        else:
            check(bias.dtype == torch.int32, op, "bias",
                  f"must be int32, or float16 / bfloat16 / float32 with pertoken_scale, got "
                  f"{bias.dtype}")
    return code


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


# ---- float8 / HiFloat8 inputs (Ascend 950) ------------------------------------------------
#
# x1 / x2 float8_e4m3fn or float8_e5m2 (torch dtypes, either with either), or both HiFloat8
# (1-byte tensors holding the bits, x1_dtype = x2_dtype = torch_npu.hifloat8, 290); output
# float16, bfloat16 or float32. Two forms, told apart by the scale's dtype:
#
# - float32 scale (1,) or (n,), optional float32 pertoken_scale (m,) or (1,), no bias (the
#   forms of op-plugin's Ascend 950 tests, test/test_custom_ops/test_npu_quant_matmul.py,
#   Ascend/op-plugin @ 517f2e7d0f202f38b76310706cb977ca2388ad21: fp8_pertensor,
#   hif8_perchannel, fp8_pertoken, hif8_pertoken, fp8_doublescale, hif8_doublescale):
#     out = fp32(x1 @ x2) * scale (* pertoken_scale[:, None])
#   Without pertoken_scale op-plugin's kernel packs such a scale with npu_trans_quant_param
#   first (the NPU then runs the int64 form below on the 19-bit scale); op_sdk uses the
#   float32 scale at full precision, as for int8 inputs (docs/operators.md, "Answered
#   differently").
# - int64 / uint64 scale (1,) or (n,) (npu_trans_quant_param's packed value: the fp32
#   scale's bits with the low 13 mantissa bits cleared in the low word, decoded by
#   unpack_quant_scale as the int8 forms decode it; the offset field and bit 46 are not
#   read), no pertoken_scale, optional float32 bias (n,) or (batch, 1, n) with a 3-D output:
#     out = (fp32(x1 @ x2) + bias) * scale
#   CANN's static T-C / T-T row of aclnnQuantMatmulV5 for Ascend 950 (hicann/ops-nn @
#   e5c3fa9327ea95ba26d06227e746923580d10921, matmul/quant_batch_matmul_v4/docs/
#   aclnnQuantMatmulV5.md: x1 / x2 FLOAT8_E4M3FN / FLOAT8_E5M2 or HIFLOAT8 / HIFLOAT8, no
#   x1Scale, x2Scale UINT64 / INT64, no x2Offset, bias null / FLOAT32, out FLOAT16 /
#   BFLOAT16 / FLOAT32, out = (x1@x2 + bias) * x2Scale; its checker,
#   matmul/quant_batch_matmul_v3/op_api/quant_matmul_checker.cpp,
#   CheckL0c2outOrL0c2ubPertensorPerchannel, refuses any other bias or out dtype and an
#   x2Offset). op-plugin's kernel (op_plugin/ops/opapi/QuantMatmulKernelNpuOpApi.cpp at the
#   commit above) passes an int64 scale to aclnnQuantMatmulV5 as x2Scale, pertoken_scale as
#   x1Scale and bias as it is.
# - float32 scale and pertoken_scale with a float32 bias (n,) or (batch, 1, n), the
#   double-scale T-T / K-C / K-T rows: out = fp32(x1 @ x2) * scale * pertoken_scale + bias,
#   the bias last (aclnnQuantMatmulV5.md at the commit above; ops-nn moved the bias after
#   the scales in 72bdb38bd, "修正 QBMM 低浮点量化 FP32 bias 后加实现", 2026-06-03; before it
#   the document had (x1@x2 + bias) * x2Scale * x1Scale). A float32 scale without
#   pertoken_scale takes the bias before the scale, as the static form does: op-plugin packs
#   such a scale first, and CANN's dynamic T-C row takes no bias.
# The values are decoded exactly; the products and their sum are taken in fp64 (exact
# unless one dot product mixes magnitudes more than 2^53 apart, which e4m3 never does) and
# rounded once to fp32; then the scales (fp32) with the bias (fp32 add) before or after as
# above, and one rounding to the output dtype.
#
# Refused although torch_npu 2.13.0's Meta answers a shape (CANN documents none of them for
# these inputs): float8 / HiFloat8 outputs (output_dtype 23 / 24 / 290 / 291 / 292), int8
# output, pertoken_scale with an int64 scale, an int32 / bfloat16 bias, offset. Refused by
# both: int32 output with an int64 scale, a float16 bias without pertoken_scale, a 2-D
# (1, n) bias (CANN documents one for 2-D outputs; the Meta takes 1-D or 3-D only). Outside
# the subset: MX scales (scale_dtype / pertoken_scale_dtype), a 2-D scale without a 2-D
# pertoken_scale (both 2-D: the per-block forms below), float4 inputs, y_scale.

_FLOAT8_IN = (torch.float8_e4m3fn, torch.float8_e5m2)
_FLOAT8_OUT = {FLOAT16: torch.float16, BFLOAT16: torch.bfloat16, FLOAT32: torch.float32}


def _is_float8_form(x1, x2, x1_dtype, x2_dtype):
    return (x1.dtype in _FLOAT8_IN or x2.dtype in _FLOAT8_IN
            or (x1_dtype == HIFLOAT8 and x2_dtype == HIFLOAT8))


def check_float8(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                 x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale,
                 op="npu_quant_matmul"):
    """Returns (output dtype, batch dims, m, n) of the float8 / HiFloat8 forms."""
    _none_outside_subset(op, offset=offset, pertoken_scale_dtype=pertoken_scale_dtype,
                         scale_dtype=scale_dtype, group_sizes=group_sizes, y_scale=y_scale)
    _check_float8_inputs(op, x1, x2, x1_dtype, x2_dtype)
    if scale.dim() != 1:
        unsupported(op, "scale", f"of {scale.dim()} dims (per-block / per-tile scales) is outside "
                    f"the supported subset with float8 / hifloat8 inputs (1-D: (1,) or (n,))")
    if pertoken_scale is not None and pertoken_scale.dim() != 1:
        unsupported(op, "pertoken_scale", f"of {pertoken_scale.dim()} dims (per-block / per-tile "
                    f"scales) is outside the supported subset with float8 / hifloat8 inputs (1-D: "
                    f"(1,) or (m,))")
    if output_dtype in (23, 24, HIFLOAT8, 291, 292, *_FLOAT8_IN):
        unsupported(op, "output_dtype", f"float8 / hifloat8 outputs are outside the supported "
                    f"subset (aclnnQuantMatmulV5 documents float16 / bfloat16 / float32 outputs "
                    f"for float8 / hifloat8 inputs), got {dtype_value_str(output_dtype)}")
    code = dtype_arg(op, "output_dtype", output_dtype, tuple(_FLOAT8_OUT), INT8)
    m, n, batch = _matmul_shapes(op, x1, x2)
    packed = scale.dtype in _PACKED_SCALE
    check(packed or scale.dtype == torch.float32, op, "scale",
          f"must be float32, or int64 / uint64 (npu_trans_quant_param's packed value), with "
          f"float8 / hifloat8 inputs, got {scale.dtype}")
    check(scale.dim() == 1 and scale.shape[0] in (1, n), op, "scale",
          f"must have shape (1,) or (n,) = ({n},), got {list(scale.shape)}")
    if pertoken_scale is not None:
        check(not packed, op, "pertoken_scale",
              "must be None with an int64 / uint64 scale (float8 / hifloat8 inputs take a "
              "per-token scale only with a float32 scale)")
        check(pertoken_scale.dtype == torch.float32, op, "pertoken_scale",
              f"must be float32, got {pertoken_scale.dtype}")
        check(pertoken_scale.dim() == 1 and pertoken_scale.shape[0] in (1, m), op,
              "pertoken_scale", f"must have shape (1,) or (m,) = ({m},), got "
              f"{list(pertoken_scale.shape)}")
    if bias is not None:
        check(bias.dtype == torch.float32, op, "bias",
              f"must be float32 with float8 / hifloat8 inputs, got {bias.dtype}")
        _check_bias_shape(op, x1, x2, bias, n)
    return code, tuple(batch), m, n


def _float8_values(x, code):
    if code == HIFLOAT8:
        return hif8_to_float(x.view(torch.uint8)).double()
    return x.double()


def _float8_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code):
    acc = torch.matmul(_float8_values(x1, x1_dtype), _float8_values(x2, x2_dtype)).float()
    if pertoken_scale is not None:  # the double-scale rows: the bias last
        out = acc * unpack_quant_scale(scale) * pertoken_scale[:, None]
        return (out if bias is None else out + bias).to(_FLOAT8_OUT[code])
    if bias is not None:  # the static row (and a float32 scale, which op-plugin packs): first
        acc = acc + bias
    return (acc * unpack_quant_scale(scale)).to(_FLOAT8_OUT[code])


# ---- per-block scales: G-B and B-B --------------------------------------------------------
#
# CANN's aclnnQuantMatmulV5 (hicann/ops-nn @ e5c3fa9327ea95ba26d06227e746923580d10921,
# matmul/quant_batch_matmul_v4/docs/aclnnQuantMatmulV5.md, "G-B量化 && B-B量化场景约束"):
# x1 (m, k) and x2 (k, n) float8_e4m3fn / float8_e5m2 (either with either) or both HiFloat8,
# or both int8; pertoken_scale (x1Scale) float32 (ceil(m / gsM), ceil(k / gsK)), scale
# (x2Scale) float32 (ceil(k / gsK), ceil(n / gsN)) (leading batch dims broadcasting with the
# output's); group_sizes [gsM, gsN, gsK] = [1, 128, 128] (G-B) or [128, 128, 128] (B-B; not
# for int8), a 0 (or group_sizes None: all three) inferred as the dim over the scale's dim
# when it divides, as CANN infers it; int8: G-B only, an optional float32 bias (n,), output
# bfloat16 (the table's only row; the formula section names float16 too); float8 / HiFloat8:
# no bias, output float16 / bfloat16 / float32. torch_npu 2.13.0's Meta answers these calls
# (quant_matmul_group_sizes_check). The doc's formula
#   out[m, n] = sum_j (x1[m, Kj] @ x2[Kj, n]) * (x1Scale[m / gsM, j] * x2Scale[j, n / gsN])
#               + bias[n],   Kj = [j * gsK, min(k, (j + 1) * gsK))
# in CANN's per-block golden's order (matmul/quant_batch_matmul_v3/tests/assets/
# qbmmv3_kernel_golden.py at that commit): each block's product, then times the product of
# its two scales, summed over the blocks in order. op_sdk takes each block's product exactly
# (fp64 of the decoded values, exact for int8 and e4m3 and for e5m2 / HiFloat8 unless one
# block spans more than 2^53 in magnitude) and rounds it once to fp32; the scales' product,
# the terms and their running sum (from +0.0) are fp32; then the bias (fp32) and one
# rounding to the output.

PER_BLOCK_FORMS = {(1, 128, 128): "G-B", (128, 128, 128): "B-B"}


def _is_per_block(x1, x2, scale, pertoken_scale):
    return (x1.dtype != torch.int32 and x2.dtype != torch.int32 and scale.dim() >= 2
            and pertoken_scale is not None and pertoken_scale.dim() >= 2)


def _check_float8_inputs(op, x1, x2, x1_dtype, x2_dtype):
    """float8_e4m3fn / float8_e5m2 x1 and x2, or both HiFloat8 (1-byte integer tensors)."""
    hif8 = x1_dtype == HIFLOAT8 and x2_dtype == HIFLOAT8
    for name, x, code in (("x1", x1, x1_dtype), ("x2", x2, x2_dtype)):
        if hif8:
            check(x.element_size() == 1 and not x.is_floating_point(), op, name,
                  f"must be a 1-byte integer tensor holding HiFloat8 bits (uint8 / int8), got "
                  f"{x.dtype}")
        else:
            if code is not None:
                unsupported(op, f"{name}_dtype", f"must be None or torch_npu.hifloat8 (290) (the "
                            f"supported subset), got {dtype_value_str(code)}")
            if x.dtype not in _FLOAT8_IN:
                unsupported(op, name, f"must be float8_e4m3fn or float8_e5m2 when the other input "
                            f"is (the supported subset), got {x.dtype}")


def check_per_block(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                    x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale,
                    op="npu_quant_matmul"):
    """Returns (output code, (gsM, gsN, gsK), batch dims, m, n) of the G-B / B-B forms."""
    _none_outside_subset(op, offset=offset, pertoken_scale_dtype=pertoken_scale_dtype,
                         scale_dtype=scale_dtype, y_scale=y_scale)
    int8 = x1.dtype == torch.int8 and x2.dtype == torch.int8 and x1_dtype is None \
        and x2_dtype is None
    if not int8:
        _check_float8_inputs(op, x1, x2, x1_dtype, x2_dtype)
    m, n, batch = _matmul_shapes(op, x1, x2)
    k = x1.shape[-1]
    check(pertoken_scale.dtype == torch.float32, op, "pertoken_scale",
          f"must be float32 with per-block scales, got {pertoken_scale.dtype}")
    check(scale.dtype == torch.float32, op, "scale",
          f"must be float32 with per-block scales, got {scale.dtype}")
    sm, sk = pertoken_scale.shape[-2:]
    sk2, sn = scale.shape[-2:]
    check(sk == sk2, op, "pertoken_scale", f"must have as many k groups (its last dim) as scale "
          f"(its dim -2, {sk2}), got shape {list(pertoken_scale.shape)}")
    given, gs = _group_sizes(op, group_sizes, (m, n, k), (sm, sn, sk))
    forms = " or ".join(f"{list(g)} ({name})" for g, name in PER_BLOCK_FORMS.items())
    check(tuple(gs) in PER_BLOCK_FORMS, op, "group_sizes",
          f"must be {forms} with per-block scales (a 0 is the dim over the scale's dim), got "
          f"{given} ([gsM, gsN, gsK] = {gs})")
    gm, gn, gk = gs
    check(not int8 or gm == 1, op, "group_sizes",
          f"must be [1, 128, 128] (G-B) with int8 x1 and x2 (B-B takes float8 / hifloat8 "
          f"inputs), got {given}")
    want_pt = [-(-m // gm), -(-k // gk)]
    want_s = [-(-k // gk), -(-n // gn)]
    check(list(pertoken_scale.shape[-2:]) == want_pt, op, "pertoken_scale",
          f"must have shape (..., ceil(m / {gm}), ceil(k / {gk})) = (..., {want_pt[0]}, "
          f"{want_pt[1]}), got {list(pertoken_scale.shape)}")
    check(list(scale.shape[-2:]) == want_s, op, "scale",
          f"must have shape (..., ceil(k / {gk}), ceil(n / {gn})) = (..., {want_s[0]}, "
          f"{want_s[1]}), got {list(scale.shape)}")
    for name, t in (("pertoken_scale", pertoken_scale), ("scale", scale)):
        check(_broadcasts_to(t.shape[:-2], batch), op, name, f"batch dims must broadcast to the "
              f"output's {list(batch)}, got {list(t.shape[:-2])}")
    if int8:
        if bias is not None:
            check(bias.dtype == torch.float32 and list(bias.shape) == [n], op, "bias",
                  f"must be float32 of shape (n,) = ({n},) with int8 x1 and x2 and per-block "
                  f"scales, got {bias.dtype} {list(bias.shape)}")
        code = dtype_arg(op, "output_dtype", output_dtype, (BFLOAT16,), INT8)
    else:
        check(bias is None, op, "bias", "must be None with float8 / hifloat8 inputs and "
              "per-block scales")
        code = dtype_arg(op, "output_dtype", output_dtype, tuple(_FLOAT8_OUT), INT8)
    return code, (gm, gn, gk), tuple(batch), m, n


def _block_sum(a, b, xs, ws, gk, bias, code):
    """sum_j fp32(a[..., Kj] @ b[..., Kj, :]) * (xs[..., j] * ws[..., j, :]) + bias: the
    per-block and MX formula on the decoded inputs (fp64) and per-block scales xs (..., m,
    blocks), ws (..., blocks, n) in fp32."""
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out = torch.zeros(torch.broadcast_shapes(a.shape[:-2], b.shape[:-2], xs.shape[:-2],
                                             ws.shape[:-2]) + (m, n))
    for j in range(-(-k // gk)):
        rows = slice(j * gk, min(k, (j + 1) * gk))
        acc = torch.matmul(a[..., rows], b[..., rows, :]).float()
        out = out + acc * (xs[..., j:j + 1] * ws[..., j:j + 1, :])
    if bias is not None:
        out = out + bias
    return out.to(_FLOAT8_OUT[code])


def _per_block_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code, gs):
    gm, gn, gk = gs
    a, b = _float8_values(x1, x1_dtype), _float8_values(x2, x2_dtype)
    xs = pertoken_scale.repeat_interleave(gm, dim=-2)[..., :a.shape[-2], :]
    ws = scale.repeat_interleave(gn, dim=-1)[..., :b.shape[-1]]
    return _block_sum(a, b, xs, ws, gk, bias, code)


# ---- MX scales (microscaling) ---------------------------------------------------------------
#
# aclnnQuantMatmulV5's "MX全量化" row for float8 inputs (same document and commit as the
# per-block forms): x1 / x2 float8_e4m3fn / float8_e5m2 (either with either), pertoken_scale
# (x1Scale) (..., m, ceil(k / 64), 2) and scale (x2Scale) (..., ceil(k / 64), n, 2), both
# float8_e8m0 held in 1-byte tensors with pertoken_scale_dtype = scale_dtype =
# torch_npu.float8_e8m0fnu (293), as torch_npu 2.13.0's Meta reads them: one scale per 32
# values of k, block j at [..., j // 2, j % 2]; group_sizes [1, 1, 32] (0s inferred as CANN
# does, k / (2 * ceil(k / 64)) for gsK); an optional float32 bias (n,) or (batch, 1, n);
# output float16 / bfloat16 / float32. An E8M0 code e is 2^(e - 127), 255 is NaN. The formula
# is the per-block one with gsK = 32 (the bias last). Outside the subset: float4 inputs
# (x1_dtype / x2_dtype float4_e2m1), the A8W4 MX row, HiFloat8 inputs.

E8M0 = 293
MX_GROUP = 32


def e8m0_to_float(codes: torch.Tensor) -> torch.Tensor:
    """E8M0 codes (a 1-byte tensor) -> float32: 2^(e - 127), NaN for 255 (exact: 2^-127 is a
    float32 subnormal)."""
    e = codes.view(torch.uint8).to(torch.int32)
    v = torch.ldexp(torch.ones_like(e, dtype=torch.float64), (e - 127).double()).float()
    return torch.where(e == 255, torch.full_like(v, float("nan")), v)


def _is_mx(scale_dtype, pertoken_scale_dtype):
    return scale_dtype is not None or pertoken_scale_dtype is not None


def check_mx(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype, x2_dtype,
             pertoken_scale_dtype, scale_dtype, group_sizes, y_scale, op="npu_quant_matmul"):
    """Returns (output code, batch dims, m, n) of the MX form."""
    _none_outside_subset(op, offset=offset, y_scale=y_scale)
    for arg, v in (("scale_dtype", scale_dtype), ("pertoken_scale_dtype", pertoken_scale_dtype)):
        check(v == E8M0, op, arg,
              f"must be torch_npu.float8_e8m0fnu ({E8M0}) with MX scales (scale_dtype and "
              f"pertoken_scale_dtype together), got {dtype_value_str(v)}")
    if _is_mx_fp4(x1, x2, x1_dtype, x2_dtype):
        m, k, n, batch, _, _ = _mx_fp4_shapes(op, x1, x2)
    else:
        if x1_dtype is not None or x2_dtype is not None or x1.dtype not in _FLOAT8_IN \
                or x2.dtype not in _FLOAT8_IN:
            unsupported(op, "x1" if x1_dtype is not None or x1.dtype not in _FLOAT8_IN else "x2",
                        f"must be float8_e4m3fn or float8_e5m2, or both float4_e2m1 "
                        f"(x1_dtype = x2_dtype = {FLOAT4_E2M1}), with MX scales (the supported "
                        f"subset), got {x1.dtype} / {x2.dtype} (x1_dtype "
                        f"{dtype_value_str(x1_dtype)}, x2_dtype {dtype_value_str(x2_dtype)})")
        m, n, batch = _matmul_shapes(op, x1, x2)
        k = x1.shape[-1]
    check(pertoken_scale is not None, op, "pertoken_scale", "is required with MX scales")
    kb = -(-k // 64)
    for name, t, want in (("pertoken_scale", pertoken_scale, [m, kb, 2]),
                          ("scale", scale, [kb, n, 2])):
        check(t.element_size() == 1 and not t.is_floating_point(), op, name,
              f"must be a 1-byte integer tensor holding float8_e8m0 codes (uint8 / int8) with MX "
              f"scales, got {t.dtype}")
        check(t.dim() >= 3 and list(t.shape[-3:]) == want
              and _broadcasts_to(t.shape[:-3], batch), op, name, f"must have shape (..., {', '.join(map(str, want))}) with MX scales (one "  # noqa: E501
              f"per 32 values of k, in pairs), its batch dims broadcasting to {list(batch)}, got "
              f"{list(t.shape)}")
    given, gs = _group_sizes(op, group_sizes, (m, n, k), (m, n, 2 * kb))
    check(gs == [1, 1, MX_GROUP], op, "group_sizes",
          f"must be [1, 1, {MX_GROUP}] with MX scales (a 0 is the dim over the scale's dim), got "
          f"{given} ([gsM, gsN, gsK] = {gs})")
    if bias is not None:
        check(bias.dtype == torch.float32, op, "bias",
              f"must be float32 with MX scales, got {bias.dtype}")
        _check_bias_shape(op, x1, x2, bias, n)
    code = dtype_arg(op, "output_dtype", output_dtype, tuple(_FLOAT8_OUT), INT8)
    return code, tuple(batch), m, n


def _is_transposed(t):
    """torch_npu's is_transpose_last_two_dims: the last two dims a transposed contiguous
    tensor's (batch dims contiguous outside them), not both of size 1."""
    if t.dim() < 2 or t.dim() > 6:
        return False
    d1, d2 = t.dim() - 1, t.dim() - 2
    if t.stride(d2) != 1 or t.stride(d1) != t.size(d2):
        return False
    size = t.size(d1) * t.size(d2)
    for b in range(t.dim() - 3, -1, -1):
        if t.stride(b) != size:
            return False
        size *= t.size(b)
    return not (t.size(d1) == 1 and t.size(d2) == 1)


def _is_mx_fp4(x1, x2, x1_dtype, x2_dtype):
    return x1_dtype == FLOAT4_E2M1 and x2_dtype == FLOAT4_E2M1


def _mx_fp4_shapes(op, x1, x2):
    """float4_e2m1 x1 / x2, two values per byte, element 2i in the low nibble (as torch_npu's
    float4_e2m1fn_x2): x1 either (..., m, k / 2) packed along k or the transpose view
    (..., m / 2, k) of a (..., k, m / 2) tensor packed along m; x2 either (..., k, n / 2)
    packed along n or the transpose view (..., k / 2, n) of an (..., n, k / 2) tensor packed
    along k; transposition told apart by strides as torch_npu's Meta does. Returns (m, k, n,
    batch, x1 transposed, x2 transposed)."""
    for name, x in (("x1", x1), ("x2", x2)):
        check(x.element_size() == 1 and not x.is_floating_point() and x.dim() >= 2, op, name,
              f"must be a 1-byte integer tensor of at least 2 dims holding float4_e2m1 pairs "
              f"(uint8 / int8), got {x.dtype} of {x.dim()} dims")
    t1 = _is_transposed(x1)
    m, k = (2 * x1.shape[-2], x1.shape[-1]) if t1 else (x1.shape[-2], 2 * x1.shape[-1])
    check(k > 2, op, "x1", f"must have k > 2 with float4_e2m1 inputs (aclnnQuantMatmulV5), got "
          f"k = {k}")
    t2 = _is_transposed(x2)
    k2, n = (2 * x2.shape[-2], x2.shape[-1]) if t2 else (x2.shape[-2], 2 * x2.shape[-1])
    check(k2 == k, op, "x2", f"must hold k = {k} values along k (as x1 {list(x1.shape)}"
          f"{', transposed' if t1 else ''}), got {list(x2.shape)} "
          f"({'transposed, ' if t2 else ''}k = {k2})")
    return m, k, n, _batch_dims(op, x1, x2), t1, t2


def _fp4_values(x, transposed):
    """float4_e2m1 pairs -> float64: (..., r, c) packed along c -> (..., r, 2c), or the
    transpose view of a tensor packed along its own last dim (..., r, c) -> (..., 2r, c)."""
    if transposed:
        return _fp4_values(x.transpose(-1, -2), False).transpose(-1, -2)
    return fp4_codes_to_float(unpack_nibbles(x.view(torch.uint8)), FLOAT4_E2M1).double()


def _mx_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code):
    if _is_mx_fp4(x1, x2, x1_dtype, x2_dtype):
        t1, t2 = _mx_fp4_shapes("npu_quant_matmul", x1, x2)[4:]
        a, b = _fp4_values(x1, t1), _fp4_values(x2, t2)
    else:
        a, b = x1.double(), x2.double()
    kb = -(-a.shape[-1] // MX_GROUP)
    xs = e8m0_to_float(pertoken_scale).flatten(-2)[..., :kb]                # (..., m, blocks)
    ws = e8m0_to_float(scale).transpose(-2, -1).flatten(-3, -2)[..., :kb, :]  # (..., blocks, n)
    return _block_sum(a, b, xs, ws, MX_GROUP, bias, code)


def quant_matmul_reference(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                           output_dtype=None, x1_dtype=None, x2_dtype=None,
                           pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                           y_scale=None):
    if _is_mx(scale_dtype, pertoken_scale_dtype):
        code, *_ = check_mx(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                            x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale)
        return _mx_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code)
    if _is_per_block(x1, x2, scale, pertoken_scale):
        code, gs, *_ = check_per_block(x1, x2, scale, offset, pertoken_scale, bias,
                                       output_dtype, x1_dtype, x2_dtype, pertoken_scale_dtype,
                                       scale_dtype, group_sizes, y_scale)
        return _per_block_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype,
                                    code, gs)
    if _is_float8_form(x1, x2, x1_dtype, x2_dtype):
        code, *_ = check_float8(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                                group_sizes, y_scale)
        return _float8_reference(x1, x2, scale, pertoken_scale, bias, x1_dtype, x2_dtype, code)
    if _is_a4w4_per_group(x1, x2, scale):
        return _a4w4_per_group_reference(x1, x2, scale, offset, pertoken_scale, bias,
                                         output_dtype, x1_dtype, x2_dtype,
                                         pertoken_scale_dtype, scale_dtype, group_sizes,
                                         y_scale)
    if _is_a8w4(x1, x2) and x1_dtype is None and x2_dtype is None:
        return _a8w4_reference(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                               group_sizes)
    if _is_a4w4(x1, x2):
        _check_a4w4(x1, x2, pertoken_scale, output_dtype, bias)
        x1, x2 = _a4w4_unpack(x1, x2)
    code = check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                              group_sizes, y_scale)
    # fp64 products of int8 values are exact for any realistic k (< 2**38)
    acc = torch.matmul(x1.double(), x2.double()).to(torch.int32)
    if bias is not None and bias.dtype == torch.int32:
        acc = acc + bias
    if code == INT32:
        return acc
    s = unpack_quant_scale(scale) if scale.dtype in _PACKED_SCALE else scale.float()
    out = acc.float() * s
    if pertoken_scale is not None:
        out = out * pertoken_scale[:, None]
        if bias is not None and bias.dtype != torch.int32:
            out = out + bias.float()
    if code == INT8:
        if scale.dtype in _PACKED_SCALE:
            return requantize_int8(out, unpack_quant_offset(scale))
        return requantize_int8(out, None if offset is None else quantize_s9(offset))
    return out.to(_OUT_DTYPES[code])


def quant_matmul_fake(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                      output_dtype=None, x1_dtype=None, x2_dtype=None,
                      pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                      y_scale=None):
    if _is_mx(scale_dtype, pertoken_scale_dtype):
        code, batch, m, n = check_mx(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                     x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                                     group_sizes, y_scale)
        batch = torch.broadcast_shapes(batch, scale.shape[:-3], pertoken_scale.shape[:-3])
        return x1.new_empty((*batch, m, n), dtype=_FLOAT8_OUT[code])
    if _is_per_block(x1, x2, scale, pertoken_scale):
        code, _, batch, m, n = check_per_block(x1, x2, scale, offset, pertoken_scale, bias,
                                               output_dtype, x1_dtype, x2_dtype,
                                               pertoken_scale_dtype, scale_dtype, group_sizes,
                                               y_scale)
        batch = torch.broadcast_shapes(batch, scale.shape[:-2], pertoken_scale.shape[:-2])
        return x1.new_empty((*batch, m, n), dtype=_FLOAT8_OUT[code])
    if _is_float8_form(x1, x2, x1_dtype, x2_dtype):
        code, batch, m, n = check_float8(x1, x2, scale, offset, pertoken_scale, bias,
                                         output_dtype, x1_dtype, x2_dtype, pertoken_scale_dtype,
                                         scale_dtype, group_sizes, y_scale)
        return x1.new_empty((*batch, m, n), dtype=_FLOAT8_OUT[code])
    if _is_a4w4_per_group(x1, x2, scale):
        code, _, n, _ = check_a4w4_per_group(
            x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype, x2_dtype,
            pertoken_scale_dtype, scale_dtype, group_sizes, y_scale)
        return x1.new_empty((x1.shape[0], n), dtype=_OUT_DTYPES[code])
    if _is_a8w4(x1, x2) and x1_dtype is None and x2_dtype is None:
        code, _, n, _ = check_a8w4(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                   group_sizes)
        return x1.new_empty((x1.shape[0], n), dtype=_OUT_DTYPES[code])
    if _is_a4w4(x1, x2):
        _check_a4w4(x1, x2, pertoken_scale, output_dtype, bias)
        k, n, _ = _a4w4_shapes(x1, x2)
        # the int8 rules on operands of the unpacked shapes
        x1 = x1.new_empty((*x1.shape[:-1], k), dtype=torch.int8)
        x2 = x2.new_empty((k, n), dtype=torch.int8)
    code = check_quant_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                              x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                              group_sizes, y_scale)
    batch = torch.broadcast_shapes(x1.shape[:-2], x2.shape[:-2])
    return x1.new_empty((*batch, x1.shape[-2], x2.shape[-1]), dtype=_OUT_DTYPES[code])


# Decode / small-batch shapes of DeepSeek-style projections. The composite is what a model
# writes without the operator: ATen's int8 GEMM and a dequantising epilogue.

def bench_inputs(n):
    """(T, K, dtype) -> an int8 (T, K) x (K, N) call, the weight stored (N, K) and passed
    transposed, with per-channel and per-token scales and a dtype output."""
    def make(t, k, dt):
        x1 = torch.randint(-127, 128, (t, k), dtype=torch.int8)
        w = torch.randint(-127, 128, (n, k), dtype=torch.int8)
        return (x1, w.t(), torch.rand(n) * 1e-3), {"pertoken_scale": torch.rand(t) + 0.5,
                                                   "output_dtype": dt}
    return make


def bench_composite(x1, x2, scale, *, pertoken_scale, output_dtype):
    acc = torch._int_mm(x1, x2)
    return (acc.float() * scale * pertoken_scale[:, None]).to(output_dtype)


# the aclnn API the binding calls: its GetWorkspaceSize prototype, as CANN declares it
# offset and bias may be null: the API document's formulas include the cases without
# bias and without offset (aclnnQuantMatmulV4, CANN 8.1.RC1 API reference).
prototypes.declare("aclnnQuantMatmulV4",
                   "const aclTensor* x1, const aclTensor* x2, const aclTensor* scale, "
                   "const aclTensor* offset, const aclTensor* pertokenScaleOptional, "
                   "const aclTensor* bias, bool transposeX1, bool transposeX2, const aclTensor* out",
                   prototypes.CANN_HEADERS + "aclnn_quant_matmul_v4.h; nullable: the aclnnQuantMatmulV4 API document",
                   nullable=("offset", "bias"))


npu_quant_matmul = define_op(
    "npu_quant_matmul(Tensor x1, Tensor x2, Tensor scale, *, Tensor? offset=None, "
    "Tensor? pertoken_scale=None, Tensor? bias=None, int? output_dtype=None, "
    "int? x1_dtype=None, int? x2_dtype=None, int? pertoken_scale_dtype=None, "
    "int? scale_dtype=None, int[]? group_sizes=None, Tensor? y_scale=None) -> Tensor",
    # CANN's own matmul kernel (no op_sdk Cube kernel); output_dtype reaches it through the
    # output tensor, which the Meta function allocates in that dtype
    aclnn=AclnnBinding("aclnnQuantMatmulV4", outputs=("out",), rename={"pertokenScaleOptional": "pertoken_scale"},
                       constants={"transposeX1": "false", "transposeX2": "false"},
                       requires={"x1_dtype": None, "x2_dtype": None, "pertoken_scale_dtype": None,
                                 "scale_dtype": None, "group_sizes": None, "y_scale": None},
                       meta_only=("output_dtype",), convert={"scale": "quant_matmul_scale"}),
    reference=quant_matmul_reference, fake=quant_matmul_fake, native=("cpu",),
    doc="int8 x int8, int4 x int4 (per channel or per group of k), int8 x int4 (per-group) "
        "and float8 / hifloat8 matmul with per-channel / per-token dequantisation.",
    benchmarks=(
        Benchmark(bench_inputs(5632), bench_composite, "torch._int_mm + dequant (eager)",
                  composite=bench_composite, n=5632,
                  shapes=tuple((t, 1024) for t in (1, 4, 8, 16, 32, 128))),
        Benchmark(bench_inputs(2048), bench_composite, "torch._int_mm + dequant (eager)",
                  composite=bench_composite, n=2048, shapes=((1, 7168), (16, 7168))),
    ),
)
