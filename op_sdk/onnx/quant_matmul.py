"""npu_quant_matmul -> op_sdk.npu.QuantBatchMatmulV3 (ONNX export): the int8 forms."""

from __future__ import annotations

import torch

from op_sdk.onnx.translation import (
    BFLOAT16, Call, FLOAT16, INT32, INT8, dt, dtype_tag, overload_key, proto_inputs,
    translates, unsupported)


@translates("npu_quant_matmul")
def _quant_matmul_call(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                       output_dtype=None, x1_dtype=None, x2_dtype=None, pertoken_scale_dtype=None,
                       scale_dtype=None, group_sizes=None, y_scale=None):
    import onnx_ir as ir

    from op_sdk.converters.ir import ge_dtype
    from op_sdk.ops._common import DTYPE_CODES

    op = "npu_quant_matmul"
    for name, v in (("x1_dtype", x1_dtype), ("x2_dtype", x2_dtype),
                    ("pertoken_scale_dtype", pertoken_scale_dtype), ("scale_dtype", scale_dtype),
                    ("group_sizes", group_sizes), ("y_scale", y_scale)):
        if v is not None:
            unsupported(op, name, "must be None")
    for name, v in (("x1", x1), ("x2", x2)):
        if v.dtype != ir.DataType.INT8:
            unsupported(op, name, f"must be int8 (int4-in-int32 operands have no ONNX "
                        f"composite), got {v.dtype.name}")
    if scale.dtype not in (ir.DataType.FLOAT, ir.DataType.BFLOAT16):
        unsupported(op, "scale", f"must be float32 or bfloat16, got {scale.dtype.name}")
    if isinstance(output_dtype, torch.dtype):
        from op_sdk.ops._common import CODE_OF

        output_dtype = CODE_OF.get(output_dtype, output_dtype)
    code = INT8 if output_dtype is None else output_dtype
    out_ir = {INT8: ir.DataType.INT8, INT32: ir.DataType.INT32, FLOAT16: ir.DataType.FLOAT16,
              BFLOAT16: ir.DataType.BFLOAT16}[code]
    ins = proto_inputs("QuantBatchMatmulV3", {"x1": x1, "x2": x2, "scale": scale,
                                              "offset": offset, "bias": bias,
                                              "pertoken_scale": pertoken_scale})
    attrs = {"dtype": ge_dtype(DTYPE_CODES[code]), "transpose_x1": False, "transpose_x2": False}
    key = overload_key(f"out{code}", dtype_tag(dt(scale)), "off" if offset is not None else "",
                       "bias_" + dtype_tag(dt(bias)), "pt" if pertoken_scale is not None else "")
    int_bias = bias is not None and bias.dtype == ir.DataType.INT32

    def composite(b, a, w, s, off=None, bi=None, pt=None):
        acc = b("MatMulInteger", a, w)  # exact int32 accumulation
        if bi is not None and int_bias:
            acc = b("Add", acc, bi)
        if code == INT32:
            return (b("Identity", acc),)
        out = b("Mul", b("Cast", acc, to=int(ir.DataType.FLOAT)), b.to_float(s))
        if pt is not None:
            out = b("Mul", out, b("Unsqueeze", pt, b.i64([-1])))
            if bi is not None and not int_bias:
                out = b("Add", out, b.to_float(bi))
        if code == INT8:
            if off is not None:  # CANN's requantisation (op_sdk.ops._common.requantize_int8)
                out = b("Add", _s9(b, out), _s9(b, off))
            q = b("Clip", b("Round", out), b.f32(-128.0), b.f32(127.0))
            return (b("Cast", q, to=int(ir.DataType.INT8)),)
        return (b("Cast", out, to=int(out_ir)),)
    return Call("QuantBatchMatmulV3", ins, attrs, key, composite, 1)


def _s9(b, x):
    """op_sdk.ops._common.quantize_s9: round half to even, saturate to [-256, 255], NaN to
    -256."""
    x = b("Where", b("IsNaN", x), b.f32(-256.0), x)
    return b("Round", b("Clip", x, b.f32(-256.0), b.f32(255.0)))
