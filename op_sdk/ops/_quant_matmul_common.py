"""npu_quant_matmul (op_sdk/ops/quant_matmul.py): the rules every form shares (the product's
shapes, batch broadcasting, group sizes, the bias) and the int8 form's checks."""

from __future__ import annotations

import torch

from op_sdk.ops._common import (
    BFLOAT16,
    FLOAT16,
    INT32,
    INT8,
    check,
    dtype_arg,
    dtype_value_str,
    unsupported,
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
