"""npu_rms_norm_quant -> op_sdk.npu.RmsNormQuant (ONNX export): the custom node (CANN's inputs
x, gamma, beta, scale, offset) and its standard-ONNX composite (int8 output; int4 is
refused): the rms-norm over the last dim, times gamma plus beta, ``v = y * (1 / scale) +
offset``, cast to float16 and back (the operator's float16 step), a NaN set to 0, rounded half
to even, clipped to [-128, 127], cast to int8."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    INT8, Call, dt, dtype_tag, ge_int8, normalize, overload_key, proto_inputs, translates,
    unsupported)


@translates("npu_rms_norm_quant")
def _rms_norm_quant_call(x, gamma, beta, scale, offset, epsilon=1e-6, *, dst_dtype=None):
    op = "npu_rms_norm_quant"
    if dst_dtype not in (None, INT8):
        unsupported(op, "dst_dtype", f"must be None or torch.int8 (1): the int4 output has no "
                    f"ONNX composite, got {dst_dtype}")
    ins = proto_inputs("RmsNormQuant", {"x": x, "gamma": gamma, "beta": beta, "scale": scale,
                                        "offset": offset})
    key = overload_key(dtype_tag(dt(x)), f"g{len(gamma.shape)}", f"eps{epsilon!r}")
    attrs = {"epsilon": float(epsilon), "dst_type": ge_int8()}

    def composite(b, x_, g, be, s, o):
        ir = b.ir
        last = b.i64([-1])
        y, _ = normalize(b, b.to_float(x_), b("Reshape", g, last), epsilon, dims=1)
        y = b("Add", y, b.to_float(b("Reshape", be, last)))
        v = b("Add", b("Mul", y, b("Div", b.f32(1.0), b.to_float(s))), b.to_float(o))
        v = b.to_float(b("Cast", v, to=int(ir.DataType.FLOAT16)))
        v = b("Where", b("IsNaN", v), b.f32(0.0), v)
        q = b("Clip", b("Round", v), b.f32(-128.0), b.f32(127.0))
        return (b("Cast", q, to=int(ir.DataType.INT8)),)
    return Call("RmsNormQuant", ins, attrs, key, composite, 1)
