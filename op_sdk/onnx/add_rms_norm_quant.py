"""npu_add_rms_norm_quant -> op_sdk.npu.AddRmsNormQuant (ONNX export)."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, INT8, QINT8, dt, dtype_tag, ge_int8, normalize, overload_key, proto_inputs,
    static_int8, translates, unsupported)


@translates("npu_add_rms_norm_quant")
def _add_rms_norm_quant_call(x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None,
                             zero_points2=None, *, axis=-1, epsilon=1e-6, div_mode=True,
                             dst_type=None):
    op = "npu_add_rms_norm_quant"
    if dst_type not in (None, INT8, QINT8):
        unsupported(op, "dst_type", f"must be None, torch.int8 (1) or torch.qint8 (12): the "
                    f"float8 / hifloat8 outputs have no ONNX composite, got {dst_type}")
    named = {"x1": x1, "x2": x2, "gamma": gamma, "scales1": scales1, "scales2": scales2,
             "zero_points1": zero_points1, "zero_points2": zero_points2, "beta": beta}
    ins = proto_inputs("AddRmsNormQuant", named)
    present = "".join("1" if v is not None else "0"
                      for v in (scales2, zero_points1, zero_points2, beta))
    key = overload_key(dtype_tag(dt(x1)), dtype_tag(dt(scales1)),
                       dtype_tag(dt(zero_points1) or dt(zero_points2)), f"g{len(gamma.shape)}",
                       f"in{present}", f"div{int(bool(div_mode))}", f"eps{epsilon!r}")
    attrs = {"axis": int(axis), "epsilon": float(epsilon), "div_mode": bool(div_mode),
             "dst_type": ge_int8()}

    def composite(b, x1_, x2_, g, s1, s2=None, z1=None, z2=None, be=None):
        import numpy as np

        ir = b.ir
        x = b("Add", b.to_float(x1_), b.to_float(x2_))
        y, _ = normalize(b, x, g, epsilon)
        if be is not None:
            y = b("Add", y, b.to_float(be))
        y1 = static_int8(b, y, s1, z1, div_mode)
        if s2 is not None:
            y2 = static_int8(b, y, s2, z2, div_mode)
        else:  # all zeros without scales2 (the operator's contract)
            y2 = b("ConstantOfShape", b("Shape", x1_), value=ir.tensor(np.zeros((1,), "int8")))
        return y1, y2, b.cast(x, x1_.dtype)
    return Call("AddRmsNormQuant", ins, attrs, key, composite, 3)
