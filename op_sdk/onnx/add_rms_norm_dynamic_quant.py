"""npu_add_rms_norm_dynamic_quant -> op_sdk.npu.AddRmsNormDynamicQuant (ONNX export)."""

from __future__ import annotations

from op_sdk.onnx.translation import (
    Call, INT8, QINT8, dt, dtype_tag, dynamic_int8, ge_int8, normalize, overload_key,
    proto_inputs, translates, unsupported)


def _empty(b, dtype):
    import numpy as np

    return b("Identity", b.const(np.zeros((0,)), dtype))


def _mask_of(smooth_scale1, smooth_scale2, output_mask):
    """Which of the two branches run (the operator's output_mask rules; already checked)."""
    if output_mask is None:
        return True, smooth_scale1 is not None and smooth_scale2 is not None
    return bool(output_mask[0]), bool(output_mask[1])


@translates("npu_add_rms_norm_dynamic_quant")
def _add_rms_norm_dynamic_quant_call(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None,
                                     beta=None, epsilon=1e-6, output_mask=None, y_dtype=None):
    op = "npu_add_rms_norm_dynamic_quant"
    if y_dtype not in (None, INT8, QINT8):
        unsupported(op, "y_dtype", f"must be None, torch.int8 (1) or torch.qint8 (12): the "
                    f"int4 / float8 / hifloat8 outputs have no ONNX composite, got {y_dtype}")
    run = _mask_of(smooth_scale1, smooth_scale2, output_mask)
    ins = proto_inputs("AddRmsNormDynamicQuant",
                       {"x1": x1, "x2": x2, "gamma": gamma, "smooth_scale1": smooth_scale1,
                        "smooth_scale2": smooth_scale2, "beta": beta})
    present = "".join("1" if v is not None else "0" for v in (smooth_scale1, smooth_scale2, beta))
    key = overload_key(dtype_tag(dt(x1)), f"in{present}", f"run{int(run[0])}{int(run[1])}",
                       f"eps{epsilon!r}")
    attrs = {"epsilon": float(epsilon), "dst_type": ge_int8()}
    if output_mask is not None:
        attrs["output_mask"] = [bool(m) for m in output_mask]

    def composite(b, x1_, x2_, g, s1=None, s2=None, be=None):
        x = b("Add", b.to_float(x1_), b.to_float(x2_))
        y, _ = normalize(b, x, g, epsilon)
        if be is not None:
            y = b("Add", y, b.to_float(be))
        outs = []
        for on, smooth in zip(run, (s1, s2)):
            outs.append(dynamic_int8(b, y, smooth) if on else
                        (_empty(b, "int8"), _empty(b, "float32")))
        (y1, sc1), (y2, sc2) = outs
        return y1, y2, b.cast(x, x1_.dtype), sc1, sc2
    return Call("AddRmsNormDynamicQuant", ins, attrs, key, composite, 5)
