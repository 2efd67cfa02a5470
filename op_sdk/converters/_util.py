"""Shared pieces of the converters: dtype arguments as GE codes."""

from __future__ import annotations

import torch

from op_sdk.converters import ir
from op_sdk.converters.graph import ConversionError
from op_sdk.ops._common import DTYPE_CODES

# ScalarType codes (c10/core/ScalarType.h), the integer form of dtype arguments
# (the contract's codes, op_sdk.ops._common.DTYPE_CODES, and the other ScalarTypes a cast
# may name)
SCALAR_TYPES = {**DTYPE_CODES, 2: torch.int16, 4: torch.int64, 7: torch.float64,
                9: torch.complex64, 10: torch.complex128, 11: torch.bool}

# torch_npu's dtype codes past ScalarType (CANN aclDataType + 256) that name GE types
_NPU_CODES = {290: "DT_HIFLOAT8", 291: "DT_FLOAT8_E5M2", 292: "DT_FLOAT8_E4M3FN"}
NPU_INT4 = 285


def dtype_of(value, op: str, arg: str, default: torch.dtype | None = None) -> torch.dtype | str:
    """A dtype argument (a torch.dtype or its ScalarType code) as a torch dtype, or as a
    GE type name for torch_npu's own codes."""
    if value is None:
        if default is None:
            raise ConversionError(f"GE conversion: {op}: argument '{arg}' is required")
        return default
    if isinstance(value, torch.dtype):
        return value
    if isinstance(value, int) and value in SCALAR_TYPES:
        return SCALAR_TYPES[value]
    if isinstance(value, int) and value in _NPU_CODES:
        return _NPU_CODES[value]
    if value == NPU_INT4:  # torch_npu.int4: int4 packed 8 per int32, as torch.quint4x2
        return torch.quint4x2
    raise ConversionError(f"GE conversion: {op}: argument '{arg}' = {value!r} is not a dtype "
                          f"the converter knows")


def refuse_int4(dtype, op: str, arg: str) -> None:
    """int4 results travel packed eight to an int32 (torch.quint4x2); writing them as GE's
    DT_INT4 plus the Bitcast / Reshape back to int32 is left to TorchAir's converters."""
    if dtype == torch.quint4x2:
        raise ConversionError(f"GE conversion: {op}: argument '{arg}' = torch.quint4x2 (int4 "
                              f"packed in int32) is not written by op_sdk's converter")


def ge_type(dtype: torch.dtype | str) -> int:
    """The ge::DataType code (Int attributes such as dst_type)."""
    if isinstance(dtype, str):
        return ir.GE_DTYPE[dtype]
    return ir.ge_dtype(dtype)


def proto_type(dtype: torch.dtype | str) -> str:
    return dtype if isinstance(dtype, str) else ir.proto_dtype(dtype)
