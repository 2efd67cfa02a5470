"""The pinned aclnn prototype table: the first-stage function
``aclnn<Op>GetWorkspaceSize(...)`` of every aclnn API an op_sdk binding calls, as CANN
declares it (parameter order, C types, which inputs may be null, which are outputs).

The OpPlugin-style bindings (csrc/npu/, ``op_sdk.npu_binding``) are checked against this
table, never against a live CANN (no machine here has one). Each entry names the CANN
version and the file it was read from; a newer CANN that changes a prototype gets a new
entry (aclnn APIs are versioned by name: aclnnDynamicQuant, aclnnDynamicQuantV2, ...).

Conventions, as in CANN's own headers:

* parameters are listed without the trailing ``uint64_t* workspaceSize,
  aclOpExecutor** executor`` pair, which every GetWorkspaceSize function ends with;
* an output parameter is named ``...Out`` or ``out`` (CANN's "计算输出");
* an input that may be null is named ``...Optional``, or is listed in ``nullable`` with
  the document that says so.

Entries whose source is an op_sdk OpDef (kernels/ascendc/<op>/op_host/<op>_def.cpp) are
the prototypes CANN generates for a custom operator package built from that OpDef:
inputs in OpDef order (an optional input gets the ``Optional`` suffix), then the
attributes, then the outputs (``<name>Out``), names in lower camel case. The table holds
them written out, and a test derives them again from the OpDef.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["AclnnParam", "AclnnPrototype", "PROTOTYPES", "CANN_VERSION", "parse_params",
           "prototype_from_opdef"]

CANN_VERSION = "8.1.RC1"
_HEADERS = (f"CANN {CANN_VERSION} toolkit, "
            "opp/built-in/op_impl/ai_core/tbe/op_api/include/aclnnop/")

# The C types a GetWorkspaceSize parameter can have here, and what EXEC_NPU_CMD_EXT
# converts a C++ argument to (op-plugin's ConvertType): pointers accept their non-const
# form, scalars must match exactly.
C_TYPES = ("const aclTensor*", "aclTensor*", "const aclIntArray*", "aclIntArray*",
           "const aclBoolArray*", "double", "float", "int64_t", "int32_t", "bool",
           "aclDataType", "char*", "const char*")


@dataclasses.dataclass(frozen=True)
class AclnnParam:
    ctype: str
    name: str
    nullable: bool = False

    @property
    def output(self) -> bool:
        return self.name == "out" or self.name.endswith("Out")

    @property
    def optional(self) -> bool:
        """May be passed as a null pointer (an absent optional tensor)."""
        return self.nullable or self.name.endswith("Optional")

    @property
    def is_tensor(self) -> bool:
        return self.ctype.replace("const ", "") == "aclTensor*"


@dataclasses.dataclass(frozen=True)
class AclnnPrototype:
    api: str                       # aclnnRmsNorm (its first stage is <api>GetWorkspaceSize)
    params: tuple[AclnnParam, ...]
    cann: str                      # the CANN version the prototype was read from
    source: str                    # the header / document / OpDef it was read from

    def param(self, name: str) -> AclnnParam:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.api} has no parameter {name!r}")

    def signature(self) -> str:
        """The C declaration of the first stage, as the binding's compile-time check
        spells it."""
        args = ", ".join(f"{p.ctype} {p.name}" for p in self.params)
        return (f"aclnnStatus {self.api}GetWorkspaceSize({args}, uint64_t* workspaceSize, "
                "aclOpExecutor** executor)")


def parse_params(text: str, nullable: tuple[str, ...] = ()) -> tuple[AclnnParam, ...]:
    """``"const aclTensor* x, double epsilon, ..."`` -> parameters (C types normalised:
    ``T *name`` and ``T* name`` are the same)."""
    params = []
    for piece in text.split(","):
        m = re.fullmatch(r"\s*(.+?)\s*(\*?)\s*([A-Za-z_][A-Za-z0-9_]*)\s*", piece)
        if m is None:
            raise ValueError(f"cannot read aclnn parameter {piece!r}")
        ctype = (m.group(1) + m.group(2)).replace(" *", "*").strip()
        if ctype not in C_TYPES:
            raise ValueError(f"aclnn parameter {piece.strip()!r}: C type {ctype!r} is not one "
                             f"the bindings handle ({', '.join(C_TYPES)})")
        params.append(AclnnParam(ctype, m.group(3), m.group(3) in nullable))
    unknown = set(nullable) - {p.name for p in params}
    if unknown:
        raise ValueError(f"nullable names no parameter: {sorted(unknown)}")
    return tuple(params)


def _entry(api: str, params: str, source: str, nullable: tuple[str, ...] = (),
           cann: str = CANN_VERSION) -> AclnnPrototype:
    return AclnnPrototype(api, parse_params(params, nullable), cann, source)


PROTOTYPES: dict[str, AclnnPrototype] = {p.api: p for p in (
    _entry("aclnnRmsNorm",
           "const aclTensor* x, const aclTensor* gamma, double epsilon, "
           "const aclTensor* yOut, const aclTensor* rstdOut",
           _HEADERS + "aclnn_rms_norm.h"),
    _entry("aclnnAddRmsNorm",
           "const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, double epsilon, "
           "const aclTensor* yOut, const aclTensor* rstdOut, const aclTensor* xOut",
           _HEADERS + "aclnn_add_rms_norm.h"),
    _entry("aclnnAddRmsNormDynamicQuant",
           "const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, "
           "const aclTensor* smoothScale1Optional, const aclTensor* smoothScale2Optional, "
           "double epsilon, const aclTensor* y1Out, const aclTensor* y2Out, "
           "const aclTensor* xOut, const aclTensor* scale1Out, const aclTensor* scale2Out",
           _HEADERS + "aclnn_add_rms_norm_dynamic_quant.h"),
    _entry("aclnnAddRmsNormQuant",
           "const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, "
           "const aclTensor* scales1, const aclTensor* scales2Optional, "
           "const aclTensor* zeroPoints1Optional, const aclTensor* zeroPoints2Optional, "
           "int64_t axis, double epsilon, bool divMode, const aclTensor* y1Out, "
           "const aclTensor* y2Out, const aclTensor* xOut",
           _HEADERS + "aclnn_add_rms_norm_quant.h"),
    _entry("aclnnDynamicQuant",
           "const aclTensor* x, const aclTensor* smoothScalesOptional, const aclTensor* yOut, "
           "const aclTensor* scaleOut",
           _HEADERS + "aclnn_dynamic_quant.h"),
    # offset and bias may be null: the API document's formulas include the cases without
    # bias and without offset (aclnnQuantMatmulV4, CANN 8.1.RC1 API reference).
    _entry("aclnnQuantMatmulV4",
           "const aclTensor* x1, const aclTensor* x2, const aclTensor* scale, "
           "const aclTensor* offset, const aclTensor* pertokenScaleOptional, "
           "const aclTensor* bias, bool transposeX1, bool transposeX2, const aclTensor* out",
           _HEADERS + "aclnn_quant_matmul_v4.h; nullable: the aclnnQuantMatmulV4 API document",
           nullable=("offset", "bias")),
    # the plugin example's operator: no CANN API, the prototype CANN generates from
    # op_sdk's own OpDef when the kernel package is built
    _entry("aclnnSiluMulQuant",
           "const aclTensor* gate, const aclTensor* up, const aclTensor* yOut, "
           "const aclTensor* scaleOut",
           "op_sdk OpDef kernels/ascendc/silu_mul_quant/op_host/silu_mul_quant_def.cpp "
           "(CANN's generated-aclnn rule)", cann="generated by CANN from op_sdk's OpDef"),
)}


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


_ATTR_CTYPES = {"Float": "double", "Int": "int64_t", "Bool": "bool", "String": "char*",
                "ListInt": "aclIntArray*"}


def prototype_from_opdef(path: str, op_type: str) -> tuple[AclnnParam, ...]:
    """The parameters CANN generates for ``aclnn<op_type>GetWorkspaceSize`` from an OpDef
    source (``this->Input("x").ParamType(OPTIONAL)...``, ``this->Attr("eps").AttrType(
    OPTIONAL).Float(...)``, ``this->Output("y")``): inputs, attributes, outputs."""
    text = open(path).read()
    if not re.search(rf"\bOP_ADD\(\s*{re.escape(op_type)}\s*\)", text):
        raise ValueError(f"{path} registers no OpDef {op_type} (OP_ADD({op_type}))")
    inputs, attrs, outputs = [], [], []
    for kind, name, chain in re.findall(
            r'this->(Input|Output|Attr)\("([A-Za-z0-9_]+)"\)((?:\s*\.\s*\w+\([^;]*?\))*)\s*;',
            text, re.S):
        optional = "OPTIONAL" in chain
        if kind == "Input":
            inputs.append(AclnnParam("const aclTensor*",
                                     _camel(name) + ("Optional" if optional else ""),
                                     False))
        elif kind == "Output":
            outputs.append(AclnnParam("const aclTensor*", _camel(name) + "Out"))
        else:
            typ = next((t for t in _ATTR_CTYPES if re.search(rf"\.{t}\(", chain)), None)
            if typ is None:
                raise ValueError(f"{path}: attribute {name!r} has a type the bindings do not "
                                 f"handle ({chain.strip()})")
            attrs.append(AclnnParam(_ATTR_CTYPES[typ], _camel(name)))
    return tuple(inputs + attrs + outputs)
