"""npu_quant_matmul's float8 / HiFloat8 form (Ascend 950; op_sdk/ops/quant_matmul.py): float8
or HiFloat8 inputs with per-channel / per-token (or packed int64) scales, its rules and
reference."""

from __future__ import annotations

import torch

from op_sdk.ops._common import (
    BFLOAT16,
    FLOAT16,
    FLOAT32,
    INT8,
    check,
    dtype_arg,
    dtype_value_str,
    unpack_quant_scale,
    unsupported,
)
from op_sdk.ops._formats import (
    HIFLOAT8,
    hif8_to_float,
)
from op_sdk.ops._quant_matmul_common import (
    _PACKED_SCALE,
    _check_bias_shape,
    _matmul_shapes,
    _none_outside_subset,
)


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
