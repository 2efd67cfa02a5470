"""Ascend IR prototypes (CANN's ``REG_OP``), pinned, and the GE data type codes.

A converter builds Ascend IR operators by name (``ge.AddRmsNormQuant(...)``); the
prototype of that name says which inputs it takes, in which order, which are optional,
what its outputs are called and which attributes it has, with their types and defaults.
The builder checks every call against it, so a converter cannot emit an input, output or
attribute name the graph engine does not know.

Each operator slice declares the prototypes its converter builds, in its own module
(``op_sdk/converters/<slice>.py``: ``ir.declare("RmsNorm", "x gamma", "y rstd", ...)``); this
module holds only the graph engine's general operators that several converters build
(``Cast``, ``Reshape``, ``Identity``, ...). A lookup of a name not yet declared loads the
slices first, so :func:`prototype` and :func:`prototypes` always see the whole table.

The table is pinned to the operator prototypes of the CANN release torch-npu 2.13.0 targets
(8.5: its Meta functions test for CANN >= 8.5.0), as CANN's ``op_graph/<op>_proto.h`` headers
declare them and TorchAir of that wheel generates its IR wrappers from them; the IR
wrappers are what the tests compare against (no CANN header is read here). Prototypes
drift between releases (an output ``x`` once named ``x_out``,
attributes such as ``dst_type`` or ``group_size`` added later), so the table is checked
against the IR wrappers TorchAir of torch-npu 2.13.0 generates from the same headers
(``tests/npu/real/test_converters.py``), and the Ascend C kernels' own prototypes
(``kernels/ascendc/<op>/op_graph/*_proto.h``) are checked against it
(``tests/test_converters.py``). An operator defined outside op_sdk registers its prototype
with :func:`register_prototype`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from op_sdk.converters.registry import load_slices

__all__ = ["IrInput", "IrAttr", "IrPrototype", "REQUIRED", "PROTOTYPES", "CANN_VERSION",
           "prototype", "prototypes", "declare", "register_prototype", "ge_dtype", "torch_dtype",
           "proto_dtype", "GE_DTYPE",
           "PROTO_DTYPE"]

CANN_VERSION = "8.5"


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()

# GE's C++ ge::DataType codes (what an Int / DataType attribute such as dst_type carries)
GE_DTYPE = {
    "DT_FLOAT": 0, "DT_FLOAT16": 1, "DT_INT8": 2, "DT_INT32": 3, "DT_UINT8": 4, "DT_INT16": 6,
    "DT_UINT16": 7, "DT_UINT32": 8, "DT_INT64": 9, "DT_UINT64": 10, "DT_DOUBLE": 11,
    "DT_BOOL": 12, "DT_STRING": 13, "DT_COMPLEX64": 16, "DT_COMPLEX128": 17, "DT_QINT8": 18,
    "DT_QINT16": 19, "DT_QINT32": 20, "DT_QUINT8": 21, "DT_QUINT16": 22, "DT_BF16": 27,
    "DT_UNDEFINED": 28, "DT_INT4": 29, "DT_COMPLEX32": 33, "DT_HIFLOAT8": 34,
    "DT_FLOAT8_E5M2": 35, "DT_FLOAT8_E4M3FN": 36, "DT_FLOAT8_E8M0": 37, "DT_FLOAT4_E2M1": 40,
    "DT_FLOAT4_E1M2": 41,
    # the rest of ge::DataType (TorchAir's ge.DataType): no torch dtype holds them
    "DT_DUAL_SUB_INT8": 14, "DT_DUAL_SUB_UINT8": 15, "DT_RESOURCE": 23, "DT_STRING_REF": 24,
    "DT_DUAL": 25, "DT_VARIANT": 26, "DT_UINT1": 30, "DT_INT2": 31, "DT_UINT2": 32,
    "DT_FLOAT6_E3M2": 38, "DT_FLOAT6_E2M3": 39, "DT_MAX": 42,
}
# the ge_ir.proto DataType enum (what a TensorDescriptor's dtype field carries): other
# numbers, the same names
PROTO_DTYPE = {
    "DT_UNDEFINED": 0, "DT_FLOAT": 1, "DT_FLOAT16": 2, "DT_INT8": 3, "DT_UINT8": 4,
    "DT_INT16": 5, "DT_UINT16": 6, "DT_INT32": 7, "DT_INT64": 8, "DT_UINT32": 9,
    "DT_UINT64": 10, "DT_BOOL": 11, "DT_DOUBLE": 12, "DT_STRING": 13, "DT_COMPLEX64": 16,
    "DT_COMPLEX128": 17, "DT_QINT8": 18, "DT_QINT16": 19, "DT_QINT32": 20, "DT_QUINT8": 21,
    "DT_QUINT16": 22, "DT_BF16": 27, "DT_INT4": 28, "DT_COMPLEX32": 32, "DT_HIFLOAT8": 33,
    "DT_FLOAT8_E5M2": 34, "DT_FLOAT8_E4M3FN": 35, "DT_FLOAT8_E8M0": 36, "DT_FLOAT4_E2M1": 39,
    "DT_FLOAT4_E1M2": 40,
}
_TORCH_TO_GE = {
    torch.float32: "DT_FLOAT", torch.float16: "DT_FLOAT16", torch.bfloat16: "DT_BF16",
    torch.float64: "DT_DOUBLE", torch.int8: "DT_INT8", torch.uint8: "DT_UINT8",
    torch.int16: "DT_INT16", torch.int32: "DT_INT32", torch.int64: "DT_INT64",
    torch.bool: "DT_BOOL", torch.complex64: "DT_COMPLEX64", torch.complex128: "DT_COMPLEX128",
    torch.float8_e5m2: "DT_FLOAT8_E5M2", torch.float8_e4m3fn: "DT_FLOAT8_E4M3FN",
    torch.qint8: "DT_QINT8", torch.quint8: "DT_QUINT8", torch.qint32: "DT_QINT32",
    torch.quint4x2: "DT_INT4", torch.uint16: "DT_UINT16", torch.uint32: "DT_UINT32",
    torch.uint64: "DT_UINT64", torch.complex32: "DT_COMPLEX32",
    torch.float8_e8m0fnu: "DT_FLOAT8_E8M0",
}


def dtype_name(dtype: torch.dtype | str | None) -> str:
    """GE's name of a torch dtype ("DT_UNDEFINED" for None)."""
    if dtype is None:
        return "DT_UNDEFINED"
    if isinstance(dtype, str) and dtype in PROTO_DTYPE:  # already a GE name
        return dtype
    try:
        return _TORCH_TO_GE[dtype]
    except KeyError:
        raise ValueError(f"GE conversion: torch dtype {dtype} has no GE data type") from None


GE_NAME_TO_TORCH = {name: dtype for dtype, name in _TORCH_TO_GE.items()}


def ge_name(code: int) -> str | None:
    """The GE name of a ge::DataType code (None for a number that is none)."""
    return next((n for n, c in GE_DTYPE.items() if c == code), None)


def torch_dtype(code: int | str) -> torch.dtype:
    """The torch dtype of a ge::DataType code or GE name (ValueError for one no torch dtype
    holds)."""
    name = code if isinstance(code, str) else (ge_name(code) or "no ge.DataType")
    if name in GE_NAME_TO_TORCH:
        return GE_NAME_TO_TORCH[name]
    raise ValueError(f"GE conversion: ge.DataType code {code} ({name}) has no torch dtype")


def ge_dtype(dtype: torch.dtype) -> int:
    """The ge::DataType code of a torch dtype (for attributes such as dst_type)."""
    return GE_DTYPE[dtype_name(dtype)]


def proto_dtype(dtype: torch.dtype | None) -> str:
    """The ge_ir.proto DataType enum name of a torch dtype (for tensor descriptors)."""
    return dtype_name(dtype)


@dataclasses.dataclass(frozen=True)
class IrInput:
    name: str
    optional: bool = False
    dynamic: bool = False


# attribute types as REG_OP spells them, and the Python values each takes
ATTR_TYPES = {"Int": int, "Float": float, "Bool": bool, "String": str, "Type": int,
              "ListInt": list, "ListFloat": list, "ListBool": list, "ListString": list}


@dataclasses.dataclass(frozen=True)
class IrAttr:
    name: str
    type: str
    default: Any = REQUIRED

    def __post_init__(self):
        if self.type not in ATTR_TYPES:
            raise ValueError(f"IR attribute {self.name!r}: unknown type {self.type!r} "
                             f"(one of {sorted(ATTR_TYPES)})")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED  # a default of None: no default, written when given


@dataclasses.dataclass(frozen=True)
class IrPrototype:
    """One ``REG_OP``: inputs in order, outputs in order, attributes in order."""

    type: str
    inputs: tuple[IrInput, ...]
    outputs: tuple[str, ...]
    attrs: tuple[IrAttr, ...] = ()
    source: str = ""  # where the prototype is defined

    def input(self, name: str) -> IrInput:
        for i in self.inputs:
            if i.name == name:
                return i
        raise KeyError(name)

    def attr(self, name: str) -> IrAttr:
        for a in self.attrs:
            if a.name == name:
                return a
        raise KeyError(name)

    def reg_op(self) -> str:
        """The prototype written as CANN's REG_OP macro (without dtype lists)."""
        lines = [f"REG_OP({self.type})"]
        for i in self.inputs:
            kind = "DYNAMIC_INPUT" if i.dynamic else "OPTIONAL_INPUT" if i.optional else "INPUT"
            lines.append(f"    .{kind}({i.name})")
        lines += [f"    .OUTPUT({o})" for o in self.outputs]
        for a in self.attrs:
            if a.required:
                lines.append(f"    .REQUIRED_ATTR({a.name}, {a.type})")
            else:
                lines.append(f"    .ATTR({a.name}, {a.type}, {a.default!r})")
        lines.append(f"    .OP_END_FACTORY_REG({self.type})")
        return "\n".join(lines)


def _proto(type_: str, inputs: str, outputs: str, attrs=(), source: str = "ops-nn") -> IrPrototype:
    """``inputs``: names, an optional one suffixed ``?``, a dynamic one ``*``."""
    ins = []
    for name in inputs.split():
        ins.append(IrInput(name.rstrip("?*"), optional=name.endswith("?"),
                           dynamic=name.endswith("*")))
    return IrPrototype(type_, tuple(ins), tuple(outputs.split()),
                       tuple(IrAttr(*a) for a in attrs), source)


def declare(type_: str, inputs: str, outputs: str, attrs=(), source: str = "ops-nn") -> IrPrototype:
    """Declare and register the IR prototype a slice's converter builds: ``inputs`` and
    ``outputs`` in order, space-separated (an optional input suffixed ``?``, a dynamic one
    ``*``), ``attrs`` as ``(name, type, default)`` triples (no default: required), ``source``
    the repository its ``op_graph/<op>_proto.h`` is read from."""
    return register_prototype(_proto(type_, inputs, outputs, attrs, source))


# The graph engine's general operators (ops-math / ops-nn), built by several converters
# (aten.py, air.py and the slices' own: a Cast after a norm, an Unsqueeze of a scale). An
# operator slice declares its fused operator's prototype itself.
PROTOTYPES: dict[str, IrPrototype] = {p.type: p for p in (
    _proto("MatMulV2", "x1 x2 bias? offset_w?", "y",
           [("transpose_x1", "Bool", False), ("transpose_x2", "Bool", False),
            ("offset_x", "Int", 0)]),
    _proto("BatchMatMulV2", "x1 x2 bias? offset_w?", "y",
           [("adj_x1", "Bool", False), ("adj_x2", "Bool", False), ("offset_x", "Int", 0)]),
    _proto("TensorMove", "x", "y", source="ops-math"),
    _proto("Cast", "x", "y", [("dst_type", "Int")], source="ops-math"),
    _proto("Unsqueeze", "x", "y", [("axes", "ListInt", [])], source="ops-math"),
    _proto("Reshape", "x shape", "y", [("axis", "Int", 0), ("num_axes", "Int", -1)],
           source="ops-math"),
    _proto("Transpose", "x perm", "y", source="ops-math"),
    _proto("Add", "x1 x2", "y", source="ops-math"),
    _proto("Sub", "x1 x2", "y", source="ops-math"),
    _proto("Mul", "x1 x2", "y", source="ops-math"),
    _proto("Div", "x1 x2", "y", source="ops-math"),
    _proto("Neg", "x", "y", source="ops-math"),
    _proto("Rsqrt", "x", "y", source="ops-math"),
    _proto("Sigmoid", "x", "y", source="ops-math"),
    _proto("Swish", "x", "y", [("scale", "Float", 1.0)], source="ops-nn"),
    _proto("Identity", "x", "y", source="ops-math"),
    _proto("Muls", "x", "y", [("value", "Float")], source="ops-math"),
    _proto("Shape", "x", "y", [("dtype", "Int", 3)], source="ops-math"),
    _proto("Gather", "x indices", "y",
           [("validate_indices", "Bool", True), ("batch_dims", "Int", 0),
            ("is_preprocessed", "Bool", False), ("negative_index_support", "Bool", False)],
           source="ops-math"),
    _proto("Pack", "x*", "y", [("N", "Int"), ("axis", "Int", 0)], source="ops-math"),
    _proto("Fill", "dims value", "y", source="ops-math"),
    _proto("ReduceSum", "x axes", "y", [("keep_dims", "Bool", False)], source="ops-math"),
    _proto("FileConstant", "", "y", [("shape", "ListInt"), ("dtype", "Type"),
                                     ("file_path", "String", ""), ("file_id", "String", "")],
           source="ops-math"),
)}

# the graph engine's own node types (not operator prototypes; written by the builder)
BUILTIN_TYPES = ("Data", "Const", "NetOutput")


def prototype(op_type: str) -> IrPrototype:
    if op_type not in PROTOTYPES:
        load_slices()
    try:
        return PROTOTYPES[op_type]
    except KeyError:
        raise KeyError(f"GE conversion: no Ascend IR prototype named {op_type!r}; a converter "
                       f"may only build operators a slice declares (ir.declare), the general "
                       f"ones of op_sdk.converters.ir or ones registered with "
                       f"register_prototype()") from None


def prototypes() -> dict[str, IrPrototype]:
    """The whole table: the general operators, every slice's and the registered ones."""
    load_slices()
    return dict(PROTOTYPES)


def register_prototype(proto: IrPrototype, *, replace: bool = False) -> IrPrototype:
    """Add an operator's IR prototype (a user's fused operator, or a newer CANN IR)."""
    if not isinstance(proto, IrPrototype):
        raise TypeError("register_prototype: expected an IrPrototype")
    old = PROTOTYPES.get(proto.type)
    if old is not None and old != proto and not replace:
        raise ValueError(f"register_prototype: {proto.type} is already registered with a "
                         f"different prototype; pass replace=True to change it")
    PROTOTYPES[proto.type] = proto
    return proto
