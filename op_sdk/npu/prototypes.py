"""The pinned aclnn prototype table: the first-stage function
``aclnn<Op>GetWorkspaceSize(...)`` of every aclnn API an op_sdk binding calls, as CANN
declares it (parameter order, C types, which inputs may be null, which are outputs).

The OpPlugin-style bindings (csrc/npu/, ``op_sdk.npu.binding``) are checked against this
table, never against a live CANN (no machine here has one). Each entry names the CANN
version and the file it was read from; a newer CANN that changes a prototype gets a new
entry (aclnn APIs are versioned by name: aclnnDynamicQuant, aclnnDynamicQuantV2, ...).

Conventions, as in CANN's own headers:

* parameters are listed without the trailing ``uint64_t* workspaceSize,
  aclOpExecutor** executor`` pair, which every GetWorkspaceSize function ends with;
* an output parameter is named ``...Out`` or ``out`` (CANN's "计算输出"), or is listed in
  ``outputs`` with the document that says so (aclnnAscendQuantV3's ``y``);
* a parameter the API updates in place is named ``...Ref`` (``varRef``, ``selfRef``);
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
# form, scalars must match exactly. A scalar may be declared const (``const int32_t
# batchSplitFactor``): a top-level const is no part of the function's type.
C_TYPES = ("const aclTensor*", "aclTensor*", "const aclIntArray*", "aclIntArray*",
           "const aclBoolArray*", "double", "float", "int64_t", "int32_t", "int8_t", "bool",
           "aclDataType", "char*", "const char*")
_SCALARS = ("double", "float", "int64_t", "int32_t", "int8_t", "bool", "aclDataType")


@dataclasses.dataclass(frozen=True)
class AclnnParam:
    ctype: str
    name: str
    nullable: bool = False
    written: bool = False  # an output whose name does not say so

    @property
    def output(self) -> bool:
        return self.written or self.name == "out" or self.name.endswith("Out")

    @property
    def ref(self) -> bool:
        """Updated in place by the API (CANN's ``...Ref`` naming): an input that is also
        written."""
        return self.name.endswith("Ref") and len(self.name) > len("Ref")

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


def parse_params(text: str, nullable: tuple[str, ...] = (),
                 outputs: tuple[str, ...] = ()) -> tuple[AclnnParam, ...]:
    """``"const aclTensor* x, double epsilon, ..."`` -> parameters (C types normalised:
    ``T *name`` and ``T* name`` are the same)."""
    params = []
    for piece in text.split(","):
        m = re.fullmatch(r"\s*(.+?)\s*(\*?)\s*([A-Za-z_][A-Za-z0-9_]*)\s*", piece)
        if m is None:
            raise ValueError(f"cannot read aclnn parameter {piece!r}")
        ctype = (m.group(1) + m.group(2)).replace(" *", "*").strip()
        if ctype not in C_TYPES and ctype.removeprefix("const ") not in _SCALARS:
            raise ValueError(f"aclnn parameter {piece.strip()!r}: C type {ctype!r} is not one "
                             f"the bindings handle ({', '.join(C_TYPES)})")
        params.append(AclnnParam(ctype, m.group(3), m.group(3) in nullable,
                                 m.group(3) in outputs))
    unknown = (set(nullable) | set(outputs)) - {p.name for p in params}
    if unknown:
        raise ValueError(f"nullable / outputs name no parameter: {sorted(unknown)}")
    return tuple(params)


# CANN 8.5.0's operator repositories, at the head of their 8.5.0 branches: the op_api
# headers there are CANN's aclnn headers for these APIs, the docs/ are its API documents.
_OPS_NN = "hicann/ops-nn 8.5.0 (commit 9f8a66e795ef1842c2118cf5bbadfe3624bdd1ef), "
_OPS_MATH = "hicann/ops-math 8.5.0 (commit b6031bda9848fb77c4124891a90ff83db5c40d21), "


def _entry(api: str, params: str, source: str, nullable: tuple[str, ...] = (),
           cann: str = CANN_VERSION, outputs: tuple[str, ...] = ()) -> AclnnPrototype:
    return AclnnPrototype(api, parse_params(params, nullable, outputs), cann, source)


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
    # generated by CANN from the AddRmsNormCast OpDef (inputs, the epsilon attribute, the
    # outputs y1, y2, rstd, x); the API document states the same prototype
    _entry("aclnnAddRmsNormCast",
           "const aclTensor* x1, const aclTensor* x2, const aclTensor* gamma, double epsilon, "
           "const aclTensor* y1Out, const aclTensor* y2Out, const aclTensor* rstdOut, "
           "const aclTensor* xOut",
           _OPS_NN + "norm/add_rms_norm_cast/docs/aclnnAddRmsNormCast.md and "
           "norm/add_rms_norm_cast/op_host/add_rms_norm_cast_def.cpp", cann="8.5.0"),
    # zeroPoints may be null: "支持传入空指针" (the API document's zeroPoints row)
    _entry("aclnnQuantize",
           "const aclTensor* x, const aclTensor* scales, const aclTensor* zeroPoints, "
           "aclDataType dtype, int32_t axis, aclTensor* out",
           _OPS_NN + "quant/quantize/op_api/aclnn_quantize.h; nullable: "
           "quant/quantize/docs/aclnnQuantize.md", nullable=("zeroPoints",), cann="8.5.0"),
    # offset may be null ("可选参数") and y is the output ("输出"): the API document's rows
    _entry("aclnnAscendQuantV3",
           "const aclTensor* x, const aclTensor* scale, const aclTensor* offset, bool sqrtMode, "
           "const char* roundMode, int32_t dstType, int32_t axis, const aclTensor* y",
           _OPS_NN + "quant/ascend_quant_v2/op_host/op_api/aclnn_ascend_quant_v3.h; nullable, "
           "outputs: quant/ascend_quant_v2/docs/aclnnAscendQuantV3.md",
           nullable=("offset",), outputs=("y",), cann="8.5.0"),
    # scale may be null: "输入（可选）" (the API document's scale row); bias is reserved,
    # "当前暂不支持", and the bindings pass null for it
    _entry("aclnnTransposeBatchMatMul",
           "const aclTensor* x1, const aclTensor* x2, const aclTensor* bias, "
           "const aclTensor* scale, const aclIntArray* permX1, const aclIntArray* permX2, "
           "const aclIntArray* permY, int8_t cubeMathType, const int32_t batchSplitFactor, "
           "aclTensor* out",
           _OPS_NN + "matmul/transpose_batch_mat_mul/op_api/aclnn_transpose_batch_mat_mul.h; "
           "nullable: matmul/transpose_batch_mat_mul/docs/aclnnTransposeBatchMatMul.md",
           nullable=("bias", "scale"), cann="8.5.0"),
    _entry("aclnnCast",
           "const aclTensor* self, const aclDataType dtype, aclTensor* out",
           _OPS_MATH + "math/cast/op_host/op_api/aclnn_cast.h", cann="8.5.0"),
    # varRef is updated in place: the API has no output parameter
    _entry("aclnnScatterNdUpdate",
           "aclTensor* varRef, const aclTensor* indices, const aclTensor* updates",
           _OPS_NN + "index/scatter_nd_update/op_host/op_api/aclnn_scatter_nd_update.h",
           cann="8.5.0"),
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
