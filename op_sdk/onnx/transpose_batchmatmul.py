"""npu_transpose_batchmatmul -> op_sdk.npu.TransposeBatchMatMul (ONNX export)."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, dt, dtype_tag, overload_key, proto_inputs, translates, unsupported)


@translates("npu_transpose_batchmatmul")
def _transpose_batchmatmul_call(input, weight, *, bias=None, scale=None, perm_x1=None,
                                perm_x2=None, perm_y=None, batch_split_factor=1):
    import onnx_ir as ir

    op = "npu_transpose_batchmatmul"
    p1 = list(perm_x1) if perm_x1 is not None else [0, 1, 2]
    p2 = list(perm_x2) if perm_x2 is not None else [0, 1, 2]
    py = list(perm_y) if perm_y is not None else [1, 0, 2]
    f = 1 if batch_split_factor is None else int(batch_split_factor)
    if scale is not None and scale.dtype != ir.DataType.FLOAT:
        unsupported(op, "scale", f"must be float32 (the int64 packed form has no ONNX "
                    f"composite), got {scale.dtype.name}")
    ins = proto_inputs("TransposeBatchMatMul", {"x1": input, "x2": weight, "bias": bias,
                                                "scale": scale})
    attrs = {"perm_x1": p1, "perm_x2": p2, "perm_y": py, "enable_hf32": False,
             "batch_split_factor": f}
    key = overload_key(dtype_tag(dt(input)), "p1_" + "".join(map(str, p1)),
                       "p2_" + "".join(map(str, p2)), f"f{f}", "scale" if scale is not None else "")

    def composite(b, x, w, bi=None, s=None):
        if p1 != [0, 1, 2]:
            x = b("Transpose", x, perm=p1)
        if p2 != [0, 1, 2]:
            w = b("Transpose", w, perm=[0, 2, 1])
        mm = b("MatMul", b.to_float(x), b.to_float(w))  # (B, M, N)
        if s is not None:
            # fp32 product * scale (B * N, per batch and column), int8, (M, 1, B * N)
            n_of_w = b("Shape", w, start=2, end=3)
            sc = b("Reshape", s, b("Concat", b.i64([-1, 1]), n_of_w, axis=0))
            q = b("Clip", b("Round", b("Mul", mm, sc)), b.f32(-128.0), b.f32(127.0))
            q = b("Transpose", b("Cast", q, to=int(ir.DataType.INT8)), perm=[1, 0, 2])
            return (b("Reshape", q, b.i64([0, 1, -1])),)
        out = b("Transpose", mm, perm=[1, 0, 2])  # (M, B, N)
        if f > 1:
            out = b("Transpose", b("Reshape", out, b.i64([0, f, -1])), perm=[1, 0, 2])
        return (b.cast(out, input.dtype),)
    return Call("TransposeBatchMatMul", ins, attrs, key, composite, 1)
