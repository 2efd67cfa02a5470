"""npu_quantize -> Quantize (div_mode=True: scales / zero points unsqueezed to the input's
rank along ``axis``) or AscendQuantV2 (div_mode=False), as TorchAir converts it."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import dtype_of, ge_type, proto_type, refuse_int4
from op_sdk.converters.graph import ConversionError

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("AscendQuantV2", "x scale offset?", "y",
           [("sqrt_mode", "Bool", False), ("round_mode", "String", "round"),
            ("dst_type", "Int", ir.GE_DTYPE["DT_INT8"]), ("axis", "Int", -1)])
ir.declare("Quantize", "x scales zero_points?", "y", [("dtype", "String"), ("axis", "Int", 1)])

_QUANT_NAMES = {torch.int8: "torch.qint8", torch.qint8: "torch.qint8",
                torch.uint8: "torch.quint8", torch.quint8: "torch.quint8",
                torch.int32: "torch.qint32", torch.qint32: "torch.qint32",
                torch.float8_e5m2: "torch.float8_e5m2",
                torch.float8_e4m3fn: "torch.float8_e4m3fn", "DT_HIFLOAT8": "torch.hifloat8",
                "DT_FLOAT8_E5M2": "torch.float8_e5m2", "DT_FLOAT8_E4M3FN": "torch.float8_e4m3fn"}


@register_fx_node_ge_converter(torch.ops.npu.npu_quantize.default, torchair_has_own=True)
def convert_npu_quantize(input, scales, zero_points, dtype, axis=1, div_mode=True,
                         meta_outputs=None):
    dst = dtype_of(dtype, "npu_quantize", "dtype")
    refuse_int4(dst, "npu_quantize", "dtype")
    if not div_mode:
        ge_dst = torch.int8 if dst == torch.qint8 else dst
        y = ge.AscendQuantV2(input, scales, zero_points, sqrt_mode=False, round_mode="round",
                             dst_type=ge_type(ge_dst), axis=min(axis, -1))
        y.desc.dtype = proto_type(dst)
        return y
    rank = input.rank
    if axis < 0:
        axis += rank
    if not 0 <= axis < rank:
        raise ConversionError(f"GE conversion: npu_quantize: argument 'axis' must be in "
                              f"[-{rank}, {rank - 1}], got {axis}")
    if dst not in _QUANT_NAMES:
        raise ConversionError(f"GE conversion: npu_quantize: argument 'dtype' {dst} has no "
                              f"Quantize dtype name")
    others = [i for i in range(rank) if i != axis]
    if zero_points is not None:
        zero_points = ge.Unsqueeze(zero_points, axes=others)
    scales = ge.Unsqueeze(scales, axes=others)
    y = ge.Quantize(input, scales, zero_points=zero_points, dtype=_QUANT_NAMES[dst], axis=axis)
    y.desc.dtype = proto_type(dst)
    return y
