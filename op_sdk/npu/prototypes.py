"""The pinned aclnn prototypes: the first-stage function ``aclnn<Op>GetWorkspaceSize(...)``
of every aclnn API an op_sdk binding calls, as CANN declares it (parameter order, C types,
which inputs may be null, which are outputs). Each slice declares the API its binding calls
next to its ``aclnn=`` declaration (:func:`declare` in ``op_sdk/ops/<slice>.py``); this
module holds the rules and the table they fill.

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

Entries whose source is an Ascend C kernel's OpDef (kernels/ascendc/<op>/op_host/<op>_def.cpp) are
the prototypes CANN generates for a custom operator package built from that OpDef:
inputs in OpDef order (an optional input gets the ``Optional`` suffix), then the
attributes, then the outputs (``<name>Out``), names in lower camel case. The table holds
them written out, and a test derives them again from the OpDef (every slice `op-sdk new-op`
writes has that test).
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["AclnnParam", "AclnnPrototype", "PROTOTYPES", "CANN_VERSION", "declare", "parse_params",
           "prototype_from_opdef"]

CANN_VERSION = "8.1.RC1"
CANN_HEADERS = (f"CANN {CANN_VERSION} toolkit, "
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
OPS_NN = "hicann/ops-nn 8.5.0 (commit 9f8a66e795ef1842c2118cf5bbadfe3624bdd1ef), "
OPS_MATH = "hicann/ops-math 8.5.0 (commit b6031bda9848fb77c4124891a90ff83db5c40d21), "


# api -> prototype: filled by the slices (op_sdk/ops/<slice>.py declares the API its
# binding calls, next to its aclnn= declaration) and by a user's operator module
PROTOTYPES: dict[str, AclnnPrototype] = {}


def declare(api: str, params: str, source: str, nullable: tuple[str, ...] = (),
            cann: str = CANN_VERSION, outputs: tuple[str, ...] = ()) -> AclnnPrototype:
    """Declare and register the GetWorkspaceSize prototype of an aclnn API, as CANN's header
    writes its parameters (``params``, without the trailing workspaceSize / executor pair);
    ``source`` cites the header or document it was read from, ``nullable`` / ``outputs``
    the parameters a document (not the name) says may be null / are written. A second
    declaration of the same API must be the same prototype."""
    proto = AclnnPrototype(api, parse_params(params, nullable, outputs), cann, source)
    old = PROTOTYPES.get(api)
    if old is not None:
        if old != proto:
            raise ValueError(f"aclnn prototype {api}: already declared as a different "
                             f"prototype ({old.source})")
        return old
    PROTOTYPES[api] = proto
    return proto


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
