"""ONNX export of models that call op_sdk's operators: :func:`export_onnx`.

``torch.onnx.export(..., dynamo=True)`` with one translation per ``torch.ops.npu``
operator overload. A translation writes one node of the custom domain ``op_sdk.npu`` whose
type is the operator's Ascend IR name (op_sdk.converters.ir: ``RmsNorm``, ``AddRmsNorm``,
``DynamicQuant``, ``AddRmsNormDynamicQuant``, ``AddRmsNormQuant``, ``Quantize`` /
``AscendQuantV2``, ``QuantBatchMatmulV3``, ``TransposeBatchMatMul``), its inputs in the
prototype's order and its attributes under the prototype's names, and adds to the model a
model-local function (``FunctionProto``) of the same domain and name whose body is the
standard-ONNX composite of the operator's documented semantics (the operator's
``reference``). The function body depends on the call (dtypes, optional inputs,
attribute values), so each distinct call form is one function *overload* (ONNX IR 10:
``FunctionProto.overload``, ``NodeProto.overload``); the node names its overload.

A runtime without the custom domain (onnxruntime) inlines the functions and runs the
composite; an NPU toolchain maps each custom node to the fused kernel. With
``composite_only=True`` the composite is written into the graph itself and no custom node
or function remains.

``npu_dtype_cast`` / ``_npu_dtype_cast`` become a plain ONNX ``Cast`` (with NaN -> 0 before
a float -> integer cast, as the operator defines it), not a custom node.

Variants the composite does not express raise ``NotImplementedError`` naming the operator
and argument at export time. onnx / onnxscript / onnx_ir are imported inside the functions
of this module only; ``import op_sdk`` does not import them.
"""

from __future__ import annotations

import re
from typing import Any

import torch

from op_sdk.onnx.functions import DOMAIN, DOMAIN_VERSION

__all__ = ["export_onnx", "DOMAIN", "UnsupportedOnnxExport", "translation_table"]


class UnsupportedOnnxExport(NotImplementedError):
    """An operator call (an argument's value) the ONNX export does not express."""


def _unsupported(op: str, arg: str, rule: str):
    raise UnsupportedOnnxExport(f"{op}: argument '{arg}' {rule} (ONNX export)")


# ScalarType codes (op_sdk.ops._common)
_UINT8, _INT8, _INT32, _FLOAT16, _FLOAT32, _QINT8, _QUINT8, _BFLOAT16 = 0, 1, 3, 5, 6, 12, 13, 15


# ---- node building ---------------------------------------------------------------------------

class _Builder:
    """Appends nodes to a node list (the exporter's current trace, or a function body)."""

    def __init__(self, nodes: list):
        import onnx_ir as ir

        self.ir = ir
        self.nodes = nodes
        self._consts: dict = {}

    def __call__(self, op_type: str, *inputs, _n: int = 1, _domain: str = "",
                 _overload: str = "", **attrs):
        ir = self.ir
        attributes = ir.convenience.convert_attributes(
            {k: v for k, v in attrs.items() if v is not None})
        node = ir.Node(_domain, op_type, list(inputs), attributes, overload=_overload,
                       num_outputs=_n, version=DOMAIN_VERSION if _domain else None)
        self.nodes.append(node)
        return node.outputs[0] if _n == 1 else tuple(node.outputs)

    def const(self, value, dtype):
        """A Constant of a numpy dtype (one node per distinct value within a builder)."""
        import numpy as np

        arr = np.asarray(value, dtype=dtype)
        key = (arr.dtype.str, arr.shape, arr.tobytes())
        if key not in self._consts:
            self._consts[key] = self("Constant", value=self.ir.tensor(arr))
        return self._consts[key]

    def f32(self, v):
        return self.const(v, "float32")

    def i64(self, v):
        return self.const(v, "int64")

    def cast(self, v, dtype):
        """Cast to an ir.DataType unless the value already has it."""
        if v.dtype == dtype:
            return v
        return self("Cast", v, to=int(dtype))

    def to_float(self, v):
        return self.cast(v, self.ir.DataType.FLOAT)


def _dt(v):
    """ir.DataType of a value (None when unknown)."""
    return None if v is None else v.dtype


def _dtype_tag(dt) -> str:
    return "none" if dt is None else dt.name.lower()


def _overload(*parts) -> str:
    text = "_".join(str(p) for p in parts if p != "")
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


# ---- composites (standard ONNX) ------------------------------------------------------------
#
# Each composite takes a builder and the operand values (typed: the value's dtype is the
# operand's) and returns the operator's outputs. fp16 / bf16 operands are cast to fp32
# first: the references compute in fp32 and round once at the end, as these do.

def _normalize(b, xf, gamma, epsilon):
    """fp32 rms-norm of xf over gamma's dims -> (y fp32, rstd fp32 keep-dims)."""
    axes = b.i64(list(range(-len(gamma.shape), 0)))
    ms = b("ReduceMean", b("Mul", xf, xf), axes, keepdims=1)
    rstd = b("Div", b.f32(1.0), b("Sqrt", b("Add", ms, b.f32(epsilon))))
    y = b("Mul", b("Mul", xf, rstd), b.to_float(gamma))
    return y, rstd


def _rms_norm(b, x, gamma, epsilon):
    y, rstd = _normalize(b, b.to_float(x), gamma, epsilon)
    return b.cast(y, x.dtype), rstd


def _add_rms_norm(b, x1, x2, gamma, epsilon):
    x = b("Add", b.to_float(x1), b.to_float(x2))
    y, rstd = _normalize(b, x, gamma, epsilon)
    return b.cast(y, x1.dtype), rstd, b.cast(x, x1.dtype)


def _dynamic_int8(b, v, smooth):
    """Symmetric per-token int8 of fp32 v (times smooth): (y int8, scale fp32 of
    v.shape[:-1]); an all-zero row gives scale 0 and y 0."""
    ir = b.ir
    if smooth is not None:
        v = b("Mul", v, b.to_float(smooth))
    last = b.i64([-1])
    amax = b("ReduceMax", b("Abs", v), last, keepdims=1)
    inv = b("Where", b("Greater", amax, b.f32(0.0)), b("Div", b.f32(127.0), amax), b.f32(0.0))
    q = b("Clip", b("Round", b("Mul", v, inv)), b.f32(-128.0), b.f32(127.0))
    y = b("Cast", q, to=int(ir.DataType.INT8))
    scale = b("Squeeze", b("Div", amax, b.f32(127.0)), last)
    return y, scale


def _empty(b, dtype):
    import numpy as np

    return b("Identity", b.const(np.zeros((0,)), dtype))


def _static_int8(b, y, scales, zero_points, div_mode, lo=-128.0, hi=127.0, to=None):
    ir = b.ir
    s = b.to_float(scales)
    v = b("Div", y, s) if div_mode else b("Mul", y, s)
    if zero_points is not None:
        v = b("Add", v, b.to_float(zero_points))
    q = b("Clip", b("Round", v), b.f32(lo), b.f32(hi))
    return b("Cast", q, to=int(to if to is not None else ir.DataType.INT8))


# ---- per operator: checks, the custom node, the composite -----------------------------------

_SPECS: dict = {}


def _spec(overload_packet_name: str, overload: str = "default"):
    def deco(fn):
        _SPECS[(overload_packet_name, overload)] = fn
        return fn
    return deco


class _Call:
    """One operator call as the translation sees it: the Ascend IR node to write, its
    inputs (prototype order, trailing absent ones dropped), attributes, overload key, and the
    composite to compute it."""

    def __init__(self, ir_type, inputs, attrs, key, composite, n_out):
        self.ir_type, self.inputs, self.attrs = ir_type, inputs, attrs
        self.key, self.composite, self.n_out = key, composite, n_out


def _proto_inputs(ir_type: str, named: dict) -> list:
    from op_sdk.converters.ir import prototype

    proto = prototype(ir_type)
    unknown = set(named) - {i.name for i in proto.inputs}
    assert not unknown, f"{ir_type}: no input {unknown}"
    ins = [named.get(i.name) for i in proto.inputs]
    while ins and ins[-1] is None:
        ins.pop()
    return ins


@_spec("npu_rms_norm")
def _rms_norm_call(input, gamma, epsilon=1e-6):
    ins = _proto_inputs("RmsNorm", {"x": input, "gamma": gamma})
    key = _overload(_dtype_tag(_dt(input)), _dtype_tag(_dt(gamma)), f"g{len(gamma.shape)}",
                    f"eps{epsilon!r}")
    return _Call("RmsNorm", ins, {"epsilon": float(epsilon)}, key,
                 lambda b, x, g: _rms_norm(b, x, g, epsilon), 2)


@_spec("npu_add_rms_norm")
def _add_rms_norm_call(x1, x2, gamma, epsilon=1e-6):
    ins = _proto_inputs("AddRmsNorm", {"x1": x1, "x2": x2, "gamma": gamma})
    key = _overload(_dtype_tag(_dt(x1)), f"g{len(gamma.shape)}", f"eps{epsilon!r}")
    return _Call("AddRmsNorm", ins, {"epsilon": float(epsilon)}, key,
                 lambda b, a, c, g: _add_rms_norm(b, a, c, g, epsilon), 3)


@_spec("npu_add_rms_norm_cast")
def _add_rms_norm_cast_call(x1, x2, gamma, epsilon=1e-6):
    ins = _proto_inputs("AddRmsNormCast", {"x1": x1, "x2": x2, "gamma": gamma})
    key = _overload(_dtype_tag(_dt(x1)), f"g{len(gamma.shape)}", f"eps{epsilon!r}")

    def composite(b, a, c, g):
        x = b("Add", b.to_float(a), b.to_float(c))
        y, rstd = _normalize(b, x, g, epsilon)
        return b("Identity", y), b.cast(y, a.dtype), rstd, b.cast(x, a.dtype)
    return _Call("AddRmsNormCast", ins, {"epsilon": float(epsilon)}, key, composite, 4)


def _ge_int8() -> int:
    from op_sdk.converters.ir import GE_DTYPE

    return GE_DTYPE["DT_INT8"]


@_spec("npu_dynamic_quant")
def _dynamic_quant_call(input, *, smooth_scales=None, group_index=None, dst_type=None,
                        quant_mode="pertoken", dst_type_max=0.0):
    op = "npu_dynamic_quant"
    if dst_type not in (None, _INT8):
        _unsupported(op, "dst_type", f"must be None or torch.int8 (1), got {dst_type}")
    if quant_mode != "pertoken":
        _unsupported(op, "quant_mode", f"must be 'pertoken', got {quant_mode!r}")
    if group_index is not None:
        _unsupported(op, "group_index", "must be None")
    ins = _proto_inputs("DynamicQuant", {"x": input, "smooth_scales": smooth_scales})
    key = _overload(_dtype_tag(_dt(input)),
                    "smooth_" + _dtype_tag(_dt(smooth_scales)) if smooth_scales is not None
                    else "nosmooth")

    def composite(b, x, smooth=None):
        return _dynamic_int8(b, b.to_float(x), smooth)
    return _Call("DynamicQuant", ins, {"dst_type": _ge_int8()}, key, composite, 2)


def _mask_of(smooth_scale1, smooth_scale2, output_mask):
    """Which of the two branches run (the operator's output_mask rules; already checked)."""
    if output_mask is None:
        return True, smooth_scale1 is not None and smooth_scale2 is not None
    return bool(output_mask[0]), bool(output_mask[1])


@_spec("npu_add_rms_norm_dynamic_quant")
def _add_rms_norm_dynamic_quant_call(x1, x2, gamma, *, smooth_scale1=None, smooth_scale2=None,
                                     beta=None, epsilon=1e-6, output_mask=None, y_dtype=None):
    op = "npu_add_rms_norm_dynamic_quant"
    if y_dtype not in (None, _INT8, _QINT8):
        _unsupported(op, "y_dtype", f"must be None, torch.int8 (1) or torch.qint8 (12): the "
                     f"int4 / float8 / hifloat8 outputs have no ONNX composite, got {y_dtype}")
    run = _mask_of(smooth_scale1, smooth_scale2, output_mask)
    ins = _proto_inputs("AddRmsNormDynamicQuant",
                        {"x1": x1, "x2": x2, "gamma": gamma, "smooth_scale1": smooth_scale1,
                         "smooth_scale2": smooth_scale2, "beta": beta})
    present = "".join("1" if v is not None else "0" for v in (smooth_scale1, smooth_scale2, beta))
    key = _overload(_dtype_tag(_dt(x1)), f"in{present}", f"run{int(run[0])}{int(run[1])}",
                    f"eps{epsilon!r}")
    attrs = {"epsilon": float(epsilon), "dst_type": _ge_int8()}
    if output_mask is not None:
        attrs["output_mask"] = [bool(m) for m in output_mask]

    def composite(b, x1_, x2_, g, s1=None, s2=None, be=None):
        x = b("Add", b.to_float(x1_), b.to_float(x2_))
        y, _ = _normalize(b, x, g, epsilon)
        if be is not None:
            y = b("Add", y, b.to_float(be))
        outs = []
        for on, smooth in zip(run, (s1, s2)):
            outs.append(_dynamic_int8(b, y, smooth) if on else
                        (_empty(b, "int8"), _empty(b, "float32")))
        (y1, sc1), (y2, sc2) = outs
        return y1, y2, b.cast(x, x1_.dtype), sc1, sc2
    return _Call("AddRmsNormDynamicQuant", ins, attrs, key, composite, 5)


@_spec("npu_add_rms_norm_quant")
def _add_rms_norm_quant_call(x1, x2, gamma, scales1, zero_points1=None, beta=None, scales2=None,
                             zero_points2=None, *, axis=-1, epsilon=1e-6, div_mode=True,
                             dst_type=None):
    op = "npu_add_rms_norm_quant"
    if dst_type not in (None, _INT8, _QINT8):
        _unsupported(op, "dst_type", f"must be None, torch.int8 (1) or torch.qint8 (12): the "
                     f"float8 / hifloat8 outputs have no ONNX composite, got {dst_type}")
    named = {"x1": x1, "x2": x2, "gamma": gamma, "scales1": scales1, "scales2": scales2,
             "zero_points1": zero_points1, "zero_points2": zero_points2, "beta": beta}
    ins = _proto_inputs("AddRmsNormQuant", named)
    present = "".join("1" if v is not None else "0"
                      for v in (scales2, zero_points1, zero_points2, beta))
    key = _overload(_dtype_tag(_dt(x1)), _dtype_tag(_dt(scales1)),
                    _dtype_tag(_dt(zero_points1) or _dt(zero_points2)), f"g{len(gamma.shape)}",
                    f"in{present}", f"div{int(bool(div_mode))}", f"eps{epsilon!r}")
    attrs = {"axis": int(axis), "epsilon": float(epsilon), "div_mode": bool(div_mode),
             "dst_type": _ge_int8()}

    def composite(b, x1_, x2_, g, s1, s2=None, z1=None, z2=None, be=None):
        import numpy as np

        ir = b.ir
        x = b("Add", b.to_float(x1_), b.to_float(x2_))
        y, _ = _normalize(b, x, g, epsilon)
        if be is not None:
            y = b("Add", y, b.to_float(be))
        y1 = _static_int8(b, y, s1, z1, div_mode)
        if s2 is not None:
            y2 = _static_int8(b, y, s2, z2, div_mode)
        else:  # all zeros without scales2 (the operator's contract)
            y2 = b("ConstantOfShape", b("Shape", x1_), value=ir.tensor(np.zeros((1,), "int8")))
        return y1, y2, b.cast(x, x1_.dtype)
    return _Call("AddRmsNormQuant", ins, attrs, key, composite, 3)


_QUANTIZE_NAMES = {_INT8: "torch.qint8", _QINT8: "torch.qint8", _UINT8: "torch.quint8",
                   _QUINT8: "torch.quint8"}


@_spec("npu_quantize")
def _quantize_call(input, scales, zero_points, dtype, axis=1, div_mode=True):
    import onnx_ir as ir

    op = "npu_quantize"
    if isinstance(dtype, torch.dtype):
        from op_sdk.ops._common import CODE_OF

        dtype = CODE_OF.get(dtype, dtype)
    if dtype not in _QUANTIZE_NAMES:
        _unsupported(op, "dtype", f"must be int8 / qint8 / uint8 / quint8 (codes 1, 12, 0, 13): "
                     f"int32 and int4 outputs have no ONNX composite, got {dtype}")
    rank = len(input.shape)
    ax = (axis % rank) if div_mode else (rank - 2 if axis == -2 else rank - 1)
    unsigned = dtype in (_UINT8, _QUINT8)
    lo, hi = (0.0, 255.0) if unsigned else (-128.0, 127.0)
    out = ir.DataType.UINT8 if unsigned else ir.DataType.INT8
    if div_mode:
        ir_type = "Quantize"
        ins = _proto_inputs(ir_type, {"x": input, "scales": scales, "zero_points": zero_points})
        attrs = {"dtype": _QUANTIZE_NAMES[dtype], "axis": ax}
    else:
        ir_type = "AscendQuantV2"
        ins = _proto_inputs(ir_type, {"x": input, "scale": scales, "offset": zero_points})
        attrs = {"sqrt_mode": False, "round_mode": "round", "axis": min(axis, -1),
                 "dst_type": _ge_int8() if not unsigned else 4}
    key = _overload(_dtype_tag(_dt(input)), f"r{rank}", f"ax{ax}", _dtype_tag(_dt(scales)),
                    _dtype_tag(_dt(zero_points)), f"div{int(bool(div_mode))}",
                    "u8" if unsigned else "i8")
    bshape = [1] * rank
    bshape[ax] = -1

    def composite(b, x, s, z=None):
        s = b("Reshape", s, b.i64(bshape))
        if z is not None:
            z = b("Reshape", z, b.i64(bshape))
        return (_static_int8(b, b.to_float(x), s, z, div_mode, lo, hi, out),)
    return _Call(ir_type, ins, attrs, key, composite, 1)


@_spec("npu_quant_matmul")
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
            _unsupported(op, name, "must be None")
    for name, v in (("x1", x1), ("x2", x2)):
        if v.dtype != ir.DataType.INT8:
            _unsupported(op, name, f"must be int8 (int4-in-int32 operands have no ONNX "
                         f"composite), got {v.dtype.name}")
    if scale.dtype not in (ir.DataType.FLOAT, ir.DataType.BFLOAT16):
        _unsupported(op, "scale", f"must be float32 or bfloat16, got {scale.dtype.name}")
    if isinstance(output_dtype, torch.dtype):
        from op_sdk.ops._common import CODE_OF

        output_dtype = CODE_OF.get(output_dtype, output_dtype)
    code = _INT8 if output_dtype is None else output_dtype
    out_ir = {_INT8: ir.DataType.INT8, _INT32: ir.DataType.INT32, _FLOAT16: ir.DataType.FLOAT16,
              _BFLOAT16: ir.DataType.BFLOAT16}[code]
    ins = _proto_inputs("QuantBatchMatmulV3", {"x1": x1, "x2": x2, "scale": scale,
                                               "offset": offset, "bias": bias,
                                               "pertoken_scale": pertoken_scale})
    attrs = {"dtype": ge_dtype(DTYPE_CODES[code]), "transpose_x1": False, "transpose_x2": False}
    key = _overload(f"out{code}", _dtype_tag(_dt(scale)), "off" if offset is not None else "",
                    "bias_" + _dtype_tag(_dt(bias)), "pt" if pertoken_scale is not None else "")
    int_bias = bias is not None and bias.dtype == ir.DataType.INT32

    def composite(b, a, w, s, off=None, bi=None, pt=None):
        acc = b("MatMulInteger", a, w)  # exact int32 accumulation
        if bi is not None and int_bias:
            acc = b("Add", acc, bi)
        if code == _INT32:
            return (b("Identity", acc),)
        out = b("Mul", b("Cast", acc, to=int(ir.DataType.FLOAT)), b.to_float(s))
        if pt is not None:
            out = b("Mul", out, b("Unsqueeze", pt, b.i64([-1])))
            if bi is not None and not int_bias:
                out = b("Add", out, b.to_float(bi))
        if code == _INT8:
            if off is not None:  # CANN's requantisation (op_sdk.ops._common.requantize_int8)
                out = b("Add", _s9(b, out), _s9(b, off))
            q = b("Clip", b("Round", out), b.f32(-128.0), b.f32(127.0))
            return (b("Cast", q, to=int(ir.DataType.INT8)),)
        return (b("Cast", out, to=int(out_ir)),)
    return _Call("QuantBatchMatmulV3", ins, attrs, key, composite, 1)


def _s9(b, x):
    """op_sdk.ops._common.quantize_s9: round half to even, saturate to [-256, 255], NaN to
    -256."""
    x = b("Where", b("IsNaN", x), b.f32(-256.0), x)
    return b("Round", b("Clip", x, b.f32(-256.0), b.f32(255.0)))


@_spec("npu_transpose_batchmatmul")
def _transpose_batchmatmul_call(input, weight, *, bias=None, scale=None, perm_x1=None,
                                perm_x2=None, perm_y=None, batch_split_factor=1):
    import onnx_ir as ir

    op = "npu_transpose_batchmatmul"
    p1 = list(perm_x1) if perm_x1 is not None else [0, 1, 2]
    p2 = list(perm_x2) if perm_x2 is not None else [0, 1, 2]
    py = list(perm_y) if perm_y is not None else [1, 0, 2]
    f = 1 if batch_split_factor is None else int(batch_split_factor)
    if scale is not None and scale.dtype != ir.DataType.FLOAT:
        _unsupported(op, "scale", f"must be float32 (the int64 packed form has no ONNX "
                     f"composite), got {scale.dtype.name}")
    ins = _proto_inputs("TransposeBatchMatMul", {"x1": input, "x2": weight, "bias": bias,
                                                 "scale": scale})
    attrs = {"perm_x1": p1, "perm_x2": p2, "perm_y": py, "enable_hf32": False,
             "batch_split_factor": f}
    key = _overload(_dtype_tag(_dt(input)), "p1_" + "".join(map(str, p1)),
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
    return _Call("TransposeBatchMatMul", ins, attrs, key, composite, 1)


# ---- npu_dtype_cast: plain Cast --------------------------------------------------------------

_CAST_CODES = {0: "UINT8", 1: "INT8", 2: "INT16", 3: "INT32", 4: "INT64", 5: "FLOAT16",
               6: "FLOAT", 7: "DOUBLE", 11: "BOOL", 15: "BFLOAT16"}
_TORCH_CAST = {torch.uint8: "UINT8", torch.int8: "INT8", torch.int16: "INT16",
               torch.int32: "INT32", torch.int64: "INT64", torch.float16: "FLOAT16",
               torch.float32: "FLOAT", torch.float64: "DOUBLE", torch.bool: "BOOL",
               torch.bfloat16: "BFLOAT16"}


def _cast(op, x, dtype):
    import onnx_ir as ir

    if isinstance(dtype, torch.dtype):
        name = _TORCH_CAST.get(dtype)
    elif isinstance(dtype, ir.DataType):
        name = dtype.name
    else:
        name = _CAST_CODES.get(dtype)
    if name is None or x.dtype in (ir.DataType.COMPLEX64, ir.DataType.COMPLEX128):
        _unsupported(op, "dtype", f"must be a real numeric dtype with a real input (complex "
                     f"casts have no ONNX form), got {dtype} from {x.dtype.name}")
    to = ir.DataType[name]
    tracer = _tracer()
    b = _Builder(tracer.nodes)
    if x.dtype.is_floating_point() and not to.is_floating_point() and to != ir.DataType.BOOL:
        x = b("Where", b("IsNaN", x), b("CastLike", b.f32(0.0), x), x)  # NaN -> 0
    return b("Cast", x, to=int(to))


def _dtype_cast_translation(input, dtype, input_dtype=None):
    return _cast("npu_dtype_cast", input, dtype)


def _private_dtype_cast_translation(input, dtype):
    return _cast("_npu_dtype_cast", input, dtype)


# ---- translations ----------------------------------------------------------------------------

def _tracer():
    import onnxscript

    return onnxscript.evaluator.default()


_PENDING: dict = {}


def _emit(call: _Call, composite_only: bool):
    """Write one call into the exporter's trace: the composite, or the custom node plus
    (once per overload, added after the export) its local function."""
    tracer = _tracer()
    b = _Builder(tracer.nodes)
    if composite_only:
        outs = call.composite(b, *call.inputs)
    else:
        outs = b(call.ir_type, *call.inputs, _n=call.n_out, _domain=DOMAIN,
                 _overload=call.key, **call.attrs)
        if call.n_out == 1:
            outs = (outs,)
        # the functions join the model after the exporter's passes (its version converter
        # inlines every local function it finds)
        _PENDING.setdefault((DOMAIN, call.ir_type, call.key), call)
    outs = tuple(outs)
    return outs[0] if len(outs) == 1 else outs


def _function(call: _Call, opset: int):
    """The local function of one overload: formal inputs named after the prototype, typed
    like the call's operands (the body picks its casts from them)."""
    import onnx_ir as ir

    from op_sdk.converters.ir import prototype

    proto = prototype(call.ir_type)
    formals = []
    for spec, actual in zip(proto.inputs, call.inputs):
        v = ir.Value(name=spec.name)
        if actual is not None:
            v.dtype = actual.dtype
            v.shape = ir.Shape([None] * len(actual.shape))
        formals.append(v)
    nodes: list = []
    b = _Builder(nodes)
    outs = call.composite(b, *[f if a is not None else None
                               for f, a in zip(formals, call.inputs)])
    results = []
    for name, v in zip(proto.outputs, outs):
        if v.producer() is None or v in results:  # a formal passed through, or repeated
            v = b("Identity", v)
        v.name = name if name not in {f.name for f in formals} else f"{name}_out"
        results.append(v)
    # intermediate values: unique names inside the body
    for i, node in enumerate(nodes):
        for j, out in enumerate(node.outputs):
            if out.name is None:
                out.name = f"_{i}_{j}"
    graph = ir.Graph(formals, results, nodes=nodes, opset_imports={"": opset},
                     name=f"{call.ir_type}_{call.key}")
    attrs = [ir.convenience.convert_attribute(k, v) for k, v in call.attrs.items()]
    return ir.Function(DOMAIN, call.ir_type, call.key, graph=graph, attributes=attrs)


def _translation(name: str, composite_only: bool):
    spec = _SPECS[(name, "default")]

    def translate(*args, **kwargs):
        return _emit(spec(*args, **kwargs), composite_only)
    translate.__name__ = f"onnx_{name}"
    return translate


def translation_table(composite_only: bool = False) -> dict:
    """{torch OpOverload: translation} of every operator the export covers."""
    table = {}
    for name, overload in _SPECS:
        table[getattr(getattr(torch.ops.npu, name), overload)] = _translation(name, composite_only)
    table[torch.ops.npu.npu_dtype_cast.default] = _dtype_cast_translation
    table[torch.ops.npu._npu_dtype_cast.default] = _private_dtype_cast_translation
    # every other op_sdk operator: a clear error instead of the exporter's dispatch failure
    from op_sdk.library import registered_ops

    for opdef in registered_ops():
        target = getattr(getattr(getattr(torch.ops, opdef.namespace), opdef.name), "default")
        if target not in table and opdef.functional is None:
            table[target] = _no_translation(f"{opdef.namespace}::{opdef.name}")
    return table


def _no_translation(name: str):
    def translate(*args, **kwargs):
        raise UnsupportedOnnxExport(f"{name}: the operator has no ONNX export (covered: "
                                    f"{', '.join(sorted(n for n, _ in _SPECS))}, npu_dtype_cast, "
                                    f"_npu_dtype_cast)")
    translate.__name__ = f"onnx_unsupported_{name.split('::')[-1]}"
    return translate


def _own_error(exc: BaseException):
    """The first UnsupportedOnnxExport / op_sdk argument error in an exception's chain."""
    from op_sdk.ops._common import OpArgumentError

    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (UnsupportedOnnxExport, OpArgumentError)):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def export_onnx(model: torch.nn.Module, args: tuple, path: Any = None, *,
                composite_only: bool = False, custom_translation_table: dict | None = None,
                **kw):
    """Export ``model`` (whose forward may call ``torch.ops.npu`` operators) to ONNX.

    ``args`` / ``path`` / ``**kw`` (``kwargs``, ``dynamic_shapes``, ``input_names``,
    ``output_names``, ``opset_version``, ``optimize``, ...) go to
    ``torch.onnx.export(model, args, path, dynamo=True, ...)``. Each npu operator becomes a
    ``op_sdk.npu`` node (its Ascend IR name) with a model-local function computing it in
    standard ONNX; ``composite_only=True`` writes the standard-ONNX composite instead.
    ``custom_translation_table`` entries of the caller are added (and win). Returns the
    ``torch.onnx.ONNXProgram`` (saved to ``path`` when given).

    Raises ``NotImplementedError`` (:class:`UnsupportedOnnxExport`) naming the operator and
    argument for a call the export does not express.
    """
    opset = kw.get("opset_version")
    if opset is not None and opset < 18:
        raise ValueError(f"export_onnx: argument 'opset_version' must be >= 18 (the composites "
                         f"use ReduceMean / ReduceMax with axes as an input), got {opset}")
    table = translation_table(composite_only)
    if custom_translation_table:
        table.update(custom_translation_table)
    kw["dynamo"] = True
    _PENDING.clear()
    try:
        program = torch.onnx.export(model, args, None, custom_translation_table=table, **kw)
        if not composite_only:
            _add_functions(program.model)
    except Exception as e:  # the exporter wraps errors: surface op_sdk's own
        own = _own_error(e)
        if own is not None and own is not e:
            raise own from e
        raise
    finally:
        _PENDING.clear()
    if path is not None:
        program.save(path)
    return program


def _add_functions(model) -> None:
    """The local function of every custom node's overload, at the model's opset."""
    opset = model.opset_imports.get("", 18)
    for ident, call in _PENDING.items():
        if ident not in model.functions:
            model.functions[ident] = _function(call, opset)
    model.opset_imports[DOMAIN] = DOMAIN_VERSION
