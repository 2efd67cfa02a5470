"""npu_dtype_cast / _npu_dtype_cast -> a plain ONNX Cast (NaN -> 0 before a float -> integer cast, as
the operator defines it): no custom node."""

from __future__ import annotations

import torch

from op_sdk.onnx.translation import Builder, tracer, unsupported, writes_plain


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
        unsupported(op, "dtype", f"must be a real numeric dtype with a real input (complex "
                    f"casts have no ONNX form), got {dtype} from {x.dtype.name}")
    to = ir.DataType[name]
    b = Builder(tracer().nodes)
    if x.dtype.is_floating_point() and not to.is_floating_point() and to != ir.DataType.BOOL:
        x = b("Where", b("IsNaN", x), b("CastLike", b.f32(0.0), x), x)  # NaN -> 0
    return b("Cast", x, to=int(to))


@writes_plain("npu_dtype_cast")
def _dtype_cast_translation(input, dtype, input_dtype=None):
    return _cast("npu_dtype_cast", input, dtype)


@writes_plain("_npu_dtype_cast")
def _private_dtype_cast_translation(input, dtype):
    return _cast("_npu_dtype_cast", input, dtype)
