"""npu_quantize -> op_sdk.npu.Quantize (div_mode=True) or AscendQuantV2 (ONNX export)."""

from __future__ import annotations

import torch

from op_sdk.onnx.translation import (
    Call, INT8, QINT8, QUINT8, UINT8, dt, dtype_tag, ge_int8, overload_key, proto_inputs,
    static_int8, translates, unsupported)


_QUANTIZE_NAMES = {INT8: "torch.qint8", QINT8: "torch.qint8", UINT8: "torch.quint8",
                   QUINT8: "torch.quint8"}


@translates("npu_quantize")
def _quantize_call(input, scales, zero_points, dtype, axis=1, div_mode=True):
    import onnx_ir as ir

    op = "npu_quantize"
    if isinstance(dtype, torch.dtype):
        from op_sdk.ops._common import CODE_OF

        dtype = CODE_OF.get(dtype, dtype)
    if dtype not in _QUANTIZE_NAMES:
        unsupported(op, "dtype", f"must be int8 / qint8 / uint8 / quint8 (codes 1, 12, 0, 13): "
                    f"int32 and int4 outputs have no ONNX composite, got {dtype}")
    rank = len(input.shape)
    ax = (axis % rank) if div_mode else (rank - 2 if axis == -2 else rank - 1)
    unsigned = dtype in (UINT8, QUINT8)
    lo, hi = (0.0, 255.0) if unsigned else (-128.0, 127.0)
    out = ir.DataType.UINT8 if unsigned else ir.DataType.INT8
    if div_mode:
        ir_type = "Quantize"
        ins = proto_inputs(ir_type, {"x": input, "scales": scales, "zero_points": zero_points})
        attrs = {"dtype": _QUANTIZE_NAMES[dtype], "axis": ax}
    else:
        ir_type = "AscendQuantV2"
        ins = proto_inputs(ir_type, {"x": input, "scale": scales, "offset": zero_points})
        attrs = {"sqrt_mode": False, "round_mode": "round", "axis": min(axis, -1),
                 "dst_type": ge_int8() if not unsigned else 4}
    key = overload_key(dtype_tag(dt(input)), f"r{rank}", f"ax{ax}", dtype_tag(dt(scales)),
                       dtype_tag(dt(zero_points)), f"div{int(bool(div_mode))}",
                       "u8" if unsigned else "i8")
    bshape = [1] * rank
    bshape[ax] = -1

    def composite(b, x, s, z=None):
        s = b("Reshape", s, b.i64(bshape))
        if z is not None:
            z = b("Reshape", z, b.i64(bshape))
        return (static_int8(b, b.to_float(x), s, z, div_mode, lo, hi, out),)
    return Call(ir_type, ins, attrs, key, composite, 1)
