"""OpPlugin-style eager bindings: an operator's NPU kernel in eager mode is a call of a
CANN aclnn API through op-plugin's ``EXEC_NPU_CMD_EXT(aclnn<Op>, args...)``, registered
with ``TORCH_LIBRARY_IMPL(<namespace>, PrivateUse1, m)``.

An operator declares its binding with ``define_op(..., aclnn=AclnnBinding(...))``. The
declaration names the aclnn API (its prototype declared beside it with
``op_sdk.npu.prototypes.declare``) and only what cannot be derived: the names of the schema's
returns, the aclnn parameters whose schema argument has another name, constants, and the
schema arguments the API cannot take. From it:

* ``check_binding`` checks the declaration against the prototype and the schema when the
  operator is defined (errors name the operator, the argument and the rule);
* ``generate_source`` writes the binding's C++ (csrc/npu/<operator>.cpp, committed; a test
  keeps it equal to what the declaration generates): the aclnn arguments in prototype
  order, the outputs allocated from the operator's Meta function, and a compile-time
  check of every converted argument's C type against the prototype;
* ``check_source`` reads the ``EXEC_NPU_CMD_EXT`` calls of a binding source (one per API
  of a binding selected by argument values) and checks their argument order against the
  prototypes (for sources edited by hand);
* op_sdk.npu.build's ``decide`` / ``load_bindings`` register a built binding only for
  operators the installed torch_npu does not define (backfilling an older torch_npu; never
  two kernels for one operator).

Verification level (op_sdk.app.deliverables): the bindings compile on x86 against the
torch_npu wheel's headers and load beside torch_npu with CANN replaced by stub libraries
(tests/npu/real/test_bindings.py); no binding has run on Ascend hardware.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import pathlib
import re
import sys
from typing import Any

from op_sdk.npu.prototypes import PROTOTYPES, AclnnParam, AclnnPrototype

__all__ = ["AclnnBinding", "BindingError", "check_binding", "binding_plan", "generate_source",
           "check_source", "binding_sources", "source_path", "SOURCE_DIR"]

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # op_sdk/
ROOT = os.path.dirname(PACKAGE)
# csrc/npu of the source tree, or the installed package's copy (op_sdk/include/csrc/npu)
SOURCE_DIR = next((d for d in (os.path.join(ROOT, "csrc", "npu"),
                               os.path.join(PACKAGE, "include", "csrc", "npu")) if os.path.isdir(d)),
                  os.path.join(ROOT, "csrc", "npu"))


class BindingError(ValueError):
    """A binding declaration or source that contradicts the aclnn prototype or the schema."""


@dataclasses.dataclass(frozen=True)
class AclnnBinding:
    """How an operator calls its aclnn API.

    api:       the aclnn API (``aclnnRmsNorm``); its prototype must be declared first
               (``op_sdk.npu.prototypes.declare``).
    outputs:   a name for each of the schema's returns, in order; the aclnn output
               parameter ``<name>Out`` (or ``out`` for a single return) writes it.
    rename:    {aclnn parameter: schema argument} where the names differ (``{"x": "input"}``);
               otherwise parameter ``smoothScale1Optional`` takes argument ``smooth_scale1``.
    constants: {aclnn parameter: C++ literal} for parameters the schema has no argument for.
    requires:  {schema argument: allowed value or tuple of values} for arguments the API
               cannot take; the binding rejects any other value with an error that names
               the argument (None: the argument must be absent).
    tensor_requires: {tensor schema argument: {"min_dim": n} and / or {"dtype": name}} for
               what the API documents of a tensor beyond the operator's own rules (an
               optional tensor is checked when given): the binding rejects any other tensor
               with an error that names the argument, the rule and what it got
               (``{"indices": {"min_dim": 2}}``; dtype names: TENSOR_DTYPES).
    meta_only: schema arguments that only choose the outputs' shape or dtype (the outputs
               are allocated from the operator's Meta function, which reads them).
    defaults:  {optional schema argument: value} for an argument the API needs a value of:
               when the call leaves it None the API gets this value (``perm_x1`` None ->
               ``[0, 1, 2]``), the one the operator's reference uses for None.
    dtype_of:  {aclnn aclDataType (or int32_t / int64_t dtype code) parameter: return name}:
               the parameter gets the dtype of that return as the Meta function allocated it
               (the dtype argument that chose it is then meta_only).
    acl_dtypes: {return name: aclDataType enumerator}: the return goes to the API tagged with
               that aclDataType instead of its storage dtype's (op-plugin's TensorWrapper:
               an MX scale's uint8 storage as ``ACL_FLOAT8_E8M0``).
    copy_of:   {return name: schema argument}: the return starts as a copy of the argument
               and the API's in-place parameter ``<name>Ref`` updates the copy, so the
               argument itself is never written (an out-of-place operator over an in-place
               API).

    convert:   {schema argument: named conversion} for an argument the API takes in another
               form, through a function of csrc/npu/binding.h (``CONVERSIONS``); a conversion
               may also read other schema arguments and returns (its context), as
               npu_quant_matmul's scale reads offset, pertoken_scale and the output's dtype.
    when / otherwise: a binding selected by argument values: ``when`` {schema argument:
               value or tuple of values} holds for the calls this binding serves, the others
               go to ``otherwise`` (another AclnnBinding, with the same outputs). The
               arguments in ``when`` need no other mention in either binding.

    An in-place operator (a ``Tensor(a!)`` argument, returned) passes that argument to the
    API's ``...Ref`` parameter and names its return after it: ``outputs=("input",)``.
    """

    api: str
    outputs: tuple[str, ...]
    rename: dict[str, str] = dataclasses.field(default_factory=dict)
    constants: dict[str, str] = dataclasses.field(default_factory=dict)
    requires: dict[str, Any] = dataclasses.field(default_factory=dict)
    tensor_requires: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    meta_only: tuple[str, ...] = ()
    defaults: dict[str, Any] = dataclasses.field(default_factory=dict)
    dtype_of: dict[str, str] = dataclasses.field(default_factory=dict)
    acl_dtypes: dict[str, str] = dataclasses.field(default_factory=dict)
    copy_of: dict[str, str] = dataclasses.field(default_factory=dict)
    convert: dict[str, str] = dataclasses.field(default_factory=dict)
    when: dict[str, Any] = dataclasses.field(default_factory=dict)
    otherwise: AclnnBinding | None = None

    @property
    def prototype(self) -> AclnnPrototype:
        return PROTOTYPES[self.api]

    @property
    def branches(self) -> tuple[AclnnBinding, ...]:
        """This binding and those ``otherwise`` chains to, in the order they are tried."""
        return (self,) + (self.otherwise.branches if self.otherwise is not None else ())

    @property
    def apis(self) -> tuple[str, ...]:
        return tuple(b.api for b in self.branches)


def by_value(api: str, argument: str, values: dict[Any, dict[str, str]],
             **kw) -> AclnnBinding:
    """One binding of ``api`` per value of the schema ``argument``: ``values`` {value: the
    constants it selects} (an aclnn parameter the argument's value chooses: quant_mode 1 ->
    ``quantModeOptional "dynamic"``, rotary_mode "half" -> ``mode 0``), tried in the order
    given: a ``when`` / ``otherwise`` chain whose last binding ``requires`` its value (any
    other value is refused, naming the argument). ``kw``: the other AclnnBinding fields
    every binding shares (their ``constants`` come first)."""
    shared = dict(kw.pop("constants", {}))
    *first, (last, last_constants) = values.items()
    binding = AclnnBinding(api, requires={argument: last},
                           constants={**shared, **last_constants}, **kw)
    for value, own in reversed(first):
        binding = AclnnBinding(api, when={argument: value}, otherwise=binding,
                               constants={**shared, **own}, **kw)
    return binding


# ---------------------------------------------------------------------------------------
# The schema, as the binding sees it


@dataclasses.dataclass(frozen=True)
class _Arg:
    name: str
    type: str          # the schema type: Tensor, Tensor?, float, int, int?, bool, str, ...
    kwarg_only: bool
    mutable: bool = False  # annotated (a!): the operator writes it


@dataclasses.dataclass(frozen=True)
class _Schema:
    args: list          # the written arguments (_Arg), in schema order
    n_returns: int
    aliased: list       # per return: the mutable argument it is (``-> Tensor(a!)``), or None


def _schema(opdef) -> _Schema:
    """The operator's schema as the binding sees it, from one parse."""
    import torch

    schema = torch._C.parse_schema(f"{opdef.qualname}{opdef.schema[len(opdef.name):]}")
    text = str(schema)
    inside = text[text.index("(") + 1: text.rindex(") ->")]
    args, kwarg_only = [], False
    writes = {a.name: set(a.alias_info.before_set) for a in schema.arguments
              if a.alias_info is not None and a.alias_info.is_write}
    for piece in _split_args(inside):  # "Tensor? smooth_scale1=None" -> ("Tensor?", ...)
        if piece == "*":
            kwarg_only = True
            continue
        m = re.fullmatch(r"(.+?)\s+(\w+)(=.*)?", piece.strip())
        args.append(_Arg(m.group(2), re.sub(r"\(.*?\)", "", m.group(1)).strip(), kwarg_only,
                         m.group(2) in writes))
    assert [x.name for x in args] == [x.name for x in schema.arguments], text
    aliased = []
    for r in schema.returns:
        alias = set(r.alias_info.before_set) if r.alias_info is not None else set()
        aliased.append(next((name for name, s in writes.items() if alias and s == alias), None))
    return _Schema(args, len(schema.returns), aliased)


# schema type -> (C++ parameter type of the kernel, C type(s) EXEC_NPU_CMD_EXT converts it to)
_CPP_TYPES = {
    "Tensor": ("const at::Tensor&", ("aclTensor*",)),
    "Tensor?": ("const c10::optional<at::Tensor>&", ("aclTensor*",)),
    "float": ("double", ("double",)),
    "int": ("int64_t", ("int64_t",)),
    "bool": ("bool", ("bool",)),
    "str": ("c10::string_view", ("char*",)),
    "int?": ("c10::optional<int64_t>", ()),
    "float?": ("c10::optional<double>", ()),
    "int[]?": ("at::OptionalIntArrayRef", ("aclIntArray*",)),
    "int[]": ("at::IntArrayRef", ("aclIntArray*",)),
    "bool[2]?": ("c10::optional<std::array<bool, 2>>", ()),
    "ScalarType": ("at::ScalarType", ("aclDataType",)),
    "ScalarType?": ("c10::optional<at::ScalarType>", ()),
}
C_STRING = "c_string"
# an int argument passed to a narrower or dtype parameter goes through a named conversion
_CONVERSIONS = {("int", "int32_t"): "static_cast<int32_t>",
                ("int", "aclDataType"): "static_cast<at::ScalarType>",
                # a str to aclnn's char*: a mutable, NUL-terminated copy (_call_lines)
                ("str", "char*"): C_STRING}
# conversions a declaration names (convert=): function of csrc/npu/binding.h -> (schema type,
# C type of the parameter it feeds[, context: the schema arguments / returns it also reads,
# passed after the converted argument in this order (a return as its allocated tensor)])
CONVERSIONS = {
    # npu_quantize's axis for aclnnAscendQuantV3: -2 stays, any other is the last axis
    "ascend_quant_axis": ("int", "int32_t"),
    # npu_quant_matmul's scale as torch_npu's op-plugin prepares it for aclnnQuantMatmulV4: a
    # float32 scale without pertoken_scale, for an output other than bfloat16 / int32, goes
    # through npu_trans_quant_param(scale, offset); any other scale as it is
    "quant_matmul_scale": ("Tensor", "aclTensor*", ("offset", "pertoken_scale", "out")),
}


# tensor_requires= dtype names -> the c10 scalar type the generated check compares with
TENSOR_DTYPES = {"int64": "at::kLong", "int32": "at::kInt", "int8": "at::kChar",
                 "float32": "at::kFloat", "float16": "at::kHalf", "bfloat16": "at::kBFloat16"}


def _conversion_types(name: str) -> tuple[str, str]:
    return CONVERSIONS[name][0], CONVERSIONS[name][1]


def _conversion_context(name: str) -> tuple[str, ...]:
    return CONVERSIONS[name][2] if len(CONVERSIONS[name]) > 2 else ()


def _default_argument(param: AclnnParam) -> str:
    """aclnn parameter name -> the schema argument of that name (``smoothScale1Optional``
    -> ``smooth_scale1``, ``yOut`` -> output ``y``)."""
    name = param.name
    for suffix in ("Optional", "Out", "Ref"):
        if name.endswith(suffix) and len(name) > len(suffix):
            name = name[: -len(suffix)]
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), name)


@dataclasses.dataclass(frozen=True)
class _Bound:
    param: AclnnParam
    kind: str          # "arg", "output", "constant" or "dtype" (of an output)
    target: str        # schema argument / output name / C++ literal
    expr: str          # the C++ lvalue passed to EXEC_NPU_CMD_EXT
    conversion: str = ""  # how expr is computed from target, when it is not target itself
    default: Any = None   # for an optional argument: the value passed when it is None
    context: tuple[str, ...] = ()  # further C++ expressions the conversion takes


def _fail(opdef, binding, rule: str) -> BindingError:
    return BindingError(f"{opdef.qualname} binding to {binding.api}: {rule}")


def binding_plan(opdef, binding: AclnnBinding | None = None,
                 chosen: tuple[str, ...] = ()) -> list[_Bound]:
    """Each aclnn parameter, in prototype order, with what the binding passes to it.
    Raises BindingError where the declaration contradicts the prototype or the schema.
    ``chosen``: the arguments whose values selected this binding (an enclosing ``when``)."""
    binding = binding or opdef.aclnn
    if binding.api not in PROTOTYPES:
        raise _fail(opdef, binding, f"no prototype for {binding.api} is declared "
                    "(op_sdk.npu.prototypes.declare, before the define_op); rule: every binding "
                    "calls an API whose prototype is pinned with its CANN version")
    proto = binding.prototype
    sig = _schema(opdef)
    args, n_returns = sig.args, sig.n_returns
    by_name = {a.name: a for a in args}
    names = {p.name for p in proto.params}
    for table, what in ((binding.rename, "rename"), (binding.constants, "constants"),
                        (binding.dtype_of, "dtype_of")):
        for key in table:
            if key not in names:
                raise _fail(opdef, binding, f"{what}= names '{key}', which is no parameter of "
                            f"{binding.api} ({', '.join(p.name for p in proto.params)})")
    for key in (list(binding.requires) + list(binding.meta_only) + list(binding.rename.values())
                + list(binding.defaults) + list(binding.copy_of.values()) + list(binding.convert)
                + list(binding.when)):
        if key not in by_name:
            raise _fail(opdef, binding, f"'{key}' is no argument of the schema "
                        f"({', '.join(by_name)})")
    if len(binding.outputs) != n_returns or len(set(binding.outputs)) != n_returns:
        raise _fail(opdef, binding, f"outputs= names {len(binding.outputs)} returns "
                    f"{binding.outputs}, the schema has {n_returns}; rule: one distinct name "
                    "per return, in schema order")
    if bool(binding.when) != (binding.otherwise is not None):
        raise _fail(opdef, binding, "when= and otherwise= go together; rule: a binding "
                    "selected by argument values names the binding of the other calls "
                    "(requires= rejects values no binding serves)")
    if binding.otherwise is not None and binding.otherwise.outputs != binding.outputs:
        raise _fail(opdef, binding, f"otherwise= binding {binding.otherwise.api} names the "
                    f"returns {binding.otherwise.outputs}; rule: the same outputs= in every "
                    "binding of one operator (the outputs are allocated once)")
    for name, rules in binding.tensor_requires.items():
        if name not in by_name or by_name[name].type not in ("Tensor", "Tensor?"):
            raise _fail(opdef, binding, f"tensor_requires= names '{name}', which is no tensor "
                        f"argument of the schema ({', '.join(a.name for a in args if a.type in ('Tensor', 'Tensor?'))})")  # noqa: E501
        for key, value in rules.items():
            ok = ((key == "min_dim" and isinstance(value, int) and value >= 1)
                  or (key == "dtype" and value in TENSOR_DTYPES))
            if not ok:
                raise _fail(opdef, binding, f"tensor_requires= gives '{name}' the rule "
                            f"{key}={value!r}; rule: min_dim=<int >= 1> or dtype=<one of "
                            f"{', '.join(TENSOR_DTYPES)}>")
    for name, conv in binding.convert.items():
        if conv not in CONVERSIONS:
            raise _fail(opdef, binding, f"convert= names '{conv}' for argument '{name}'; rule: "
                        f"a conversion of csrc/npu/binding.h ({', '.join(CONVERSIONS)})")
    aliased = sig.aliased
    for name, alias in zip(binding.outputs, aliased):
        if alias is not None and (name != alias or n_returns != 1):
            raise _fail(opdef, binding, f"the return '{name}' is the mutable argument "
                        f"'{alias}'; rule: an in-place binding has that one return, named "
                        "after the argument it writes")
    for name, value in binding.acl_dtypes.items():
        if not re.fullmatch(r"ACL_[A-Z0-9_]+", value):
            raise _fail(opdef, binding, f"acl_dtypes= tags '{name}' with {value!r}; rule: an "
                        "aclDataType enumerator (ACL_...)")
    for table, what in ((binding.dtype_of.values(), "dtype_of"), (binding.copy_of, "copy_of"),
                        (binding.acl_dtypes, "acl_dtypes")):
        for name in table:
            if name not in binding.outputs or name in aliased:
                raise _fail(opdef, binding, f"{what}= names '{name}', which is no return the "
                            f"binding allocates (outputs={binding.outputs})")

    for arg in args:
        if arg.type not in _CPP_TYPES:
            raise _fail(opdef, binding, f"argument '{arg.name}' has type {arg.type}, which the "
                        f"bindings do not handle ({', '.join(_CPP_TYPES)})")
    for name, value in binding.requires.items():
        values = value if isinstance(value, tuple) else (value,)
        if None in values and not by_name[name].type.endswith("?"):
            raise _fail(opdef, binding, f"requires= allows None for argument '{name}' "
                        f"({by_name[name].type}), which cannot be None; rule: None only for "
                        "optional arguments")
    for name, value in binding.defaults.items():
        arg = by_name[name]
        if arg.type not in ("int?", "float?", "int[]?") or value is None:
            raise _fail(opdef, binding, f"defaults= gives argument '{name}' ({arg.type}) the "
                        f"value {value!r}; rule: a default (not None) for an optional int, "
                        "float or int[] argument")
    for name, source in binding.copy_of.items():
        if by_name[source].type != "Tensor" or by_name[source].mutable:
            raise _fail(opdef, binding, f"copy_of= copies argument '{source}' "
                        f"({by_name[source].type}) into '{name}'; rule: the copy is of a "
                        "Tensor argument the operator does not write")

    plan: list[_Bound] = []
    seen_args: set[str] = set()
    seen_outputs: list[str] = []
    for i, p in enumerate(proto.params):
        where = f"parameter {i + 1} '{p.name}' ({p.ctype})"
        if p.name in binding.constants:
            if p.output or p.ref:
                raise _fail(opdef, binding, f"{where} is an output; rule: outputs are the "
                            "operator's returns, never constants")
            plan.append(_Bound(p, "constant", binding.constants[p.name], p.name))
            continue
        if p.name in binding.dtype_of:
            output = binding.dtype_of[p.name]
            if p.ctype.replace("const ", "") not in ("aclDataType", "int32_t", "int64_t"):
                raise _fail(opdef, binding, f"dtype_of= gives {where} the dtype of '{output}'; "
                            "rule: a dtype goes to an aclDataType (or int32_t / int64_t) "
                            "parameter")
            plan.append(_Bound(p, "dtype", output, f"{output}_dtype"))
            continue
        target = binding.rename.get(p.name, _default_argument(p))
        # an in-place parameter updates a return: one no argument is named after, or a
        # copy_of= return (which may share its argument's name: queryRef -> query)
        if p.output or (p.ref and (target not in by_name or target in binding.copy_of)):
            if p.name == "out" and len(binding.outputs) == 1 and p.name not in binding.rename:
                target = binding.outputs[0]
            if target not in binding.outputs or target in aliased:
                raise _fail(opdef, binding, f"{where} is an output and no return is named "
                            f"'{target}' (outputs={binding.outputs}); rule: the output "
                            "parameter <name>Out (or <name>Ref, updating a copy_of= return) "
                            "writes the return named <name>")
            if p.ref != (target in binding.copy_of):
                raise _fail(opdef, binding, f"{where} writes the return '{target}'; rule: an "
                            "in-place parameter (...Ref) updates a return declared in copy_of= "
                            "(a copy of an argument), an output parameter writes a fresh one")
            seen_outputs.append(target)
            tagged = target in binding.acl_dtypes
            plan.append(_Bound(p, "output", target,
                               f"{target}_tagged" if tagged else f"{target}_out",
                               binding.acl_dtypes.get(target, "")))
            continue
        arg = by_name.get(target)
        if arg is None:
            raise _fail(opdef, binding, f"{where} takes schema argument '{target}', which the "
                        f"schema does not have ({', '.join(by_name)}); rule: each aclnn "
                        "parameter takes the argument of its name, or the one rename= or "
                        "constants= gives it")
        if target in seen_args:
            raise _fail(opdef, binding, f"argument '{target}' is passed again, to {where}; "
                        "rule: each schema argument reaches one aclnn parameter")
        if (target in binding.requires or target in binding.meta_only or target in binding.when
                or target in chosen):
            raise _fail(opdef, binding, f"argument '{target}' is passed to {where} and also "
                        "listed in requires= / meta_only= / when=")
        if p.ref != arg.mutable:
            access = "mutable" if arg.mutable else "read-only"
            raise _fail(opdef, binding, f"argument '{target}' ({access}) is passed to {where}; "
                        "rule: the operator's mutable (a!) argument, and only it, goes to the "
                        "API's in-place ...Ref parameter")
        if target in binding.copy_of.values():
            raise _fail(opdef, binding, f"argument '{target}' is passed to {where} and also "
                        "copied by copy_of=")
        default = binding.defaults.get(target)
        typ = arg.type[:-1] if default is not None else arg.type  # "int[]?" -> "int[]"
        cpp, converts_to = _CPP_TYPES.get(typ, (None, ()))
        want = p.ctype.replace("const ", "")
        conversion = _CONVERSIONS.get((typ, want))
        context = ()
        if target in binding.convert:
            name = binding.convert[target]
            if _conversion_types(name) != (typ, want):
                raise _fail(opdef, binding, f"convert= passes argument '{target}' ({arg.type}) "
                            f"through {name}, which takes {CONVERSIONS[name][0]} to "
                            f"{CONVERSIONS[name][1]}, to {where}; rule: the conversion's types")
            conversion = f"op_sdk_npu::{name}"
            for ctx in _conversion_context(name):
                if ctx in by_name:
                    context += (ctx,)
                elif ctx in binding.outputs:
                    context += (f"{ctx}_out",)
                else:
                    raise _fail(opdef, binding, f"convert= passes argument '{target}' through "
                                f"{name}, which reads '{ctx}', no argument or return of the "
                                "schema; rule: a conversion's context is the operator's")
        if cpp is None or (want not in converts_to and conversion is None):
            raise _fail(opdef, binding, f"argument '{target}' ({arg.type}) cannot be passed "
                        f"to {where}; rule: Tensor/Tensor? -> aclTensor*, float -> double, "
                        "int -> int64_t (or int32_t / aclDataType through a conversion), "
                        "bool -> bool, str -> char*, int[] -> aclIntArray* (an optional one "
                        "with its defaults= value)")
        if arg.type == "Tensor?" and not p.optional:
            raise _fail(opdef, binding, f"optional argument '{target}' (Tensor?) is passed to "
                        f"{where}, which may not be null; rule: an optional tensor goes to an "
                        "...Optional parameter (or one the table marks nullable), or is "
                        "pinned with requires=")
        seen_args.add(target)
        if conversion:
            expr = f"{target}_{re.sub(r'[^a-z0-9_]', '', want.lower())}"
        elif default is not None:
            expr = f"{target}_value"
        else:
            expr = target
        plan.append(_Bound(p, "arg", target, expr, conversion or "", default, context))
    written = seen_outputs + [o for o, a in zip(binding.outputs, aliased)
                              if a is not None and a in seen_args]
    if sorted(written) != sorted(binding.outputs):
        missing = [o for o in binding.outputs if o not in written]
        raise _fail(opdef, binding, f"returns {missing} are written by no output parameter "
                    f"of {binding.api}; rule: every return is an aclnn output (or the "
                    "mutable argument its ...Ref parameter updates)")
    unused = [d for d in binding.defaults if d not in seen_args]
    if unused:
        raise _fail(opdef, binding, f"defaults= names {unused}, which reach no parameter of "
                    f"{binding.api}; rule: a default is for an argument the API takes")
    unconverted = [c for c in binding.convert if c not in seen_args]
    if unconverted:
        raise _fail(opdef, binding, f"convert= names {unconverted}, which reach no parameter "
                    f"of {binding.api}")
    unbound = [a.name for a in args if a.name not in seen_args and a.name not in
               binding.requires and a.name not in binding.meta_only
               and a.name not in binding.copy_of.values() and a.name not in binding.when
               and a.name not in chosen]
    if unbound:
        raise _fail(opdef, binding, f"schema argument(s) {unbound} reach no parameter of "
                    f"{binding.api}; rule: every argument is passed, pinned with requires= "
                    "(the binding rejects other values) or listed in meta_only=")
    return plan


def _branch_plans(opdef, binding: AclnnBinding) -> list[tuple[AclnnBinding, list[_Bound]]]:
    """Each binding of the chain (``when`` / ``otherwise``) with its plan."""
    out, chosen = [], ()
    for branch in binding.branches:
        out.append((branch, binding_plan(opdef, branch, chosen)))
        chosen = chosen + tuple(branch.when)
    return out


def check_binding(opdef, binding: AclnnBinding) -> None:
    """Raise BindingError unless ``binding`` (and every binding it selects between) agrees
    with its prototype and the schema."""
    _branch_plans(opdef, binding)


# ---------------------------------------------------------------------------------------
# C++


def source_path(opdef) -> str:
    """csrc/npu/<operator>.cpp: op_sdk's own (SOURCE_DIR), or a user project's, beside the
    package that declares the operator (<root>/<package>/ops/<slice>.py -> <root>/csrc/npu,
    the layout `op-sdk new-op` writes)."""
    parts = opdef.module.split(".") if opdef.module else []
    declared_in = getattr(sys.modules.get(opdef.module), "__file__", None) if parts else None
    if parts and parts[0] != "op_sdk" and declared_in:
        root = pathlib.Path(declared_in).resolve().parents[len(parts) - 1]
        return os.path.join(root, "csrc", "npu", f"{opdef.name}.cpp")
    return os.path.join(SOURCE_DIR, f"{opdef.name}.cpp")


def _cpp_literal(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(value)


def _require_condition(arg: _Arg, value) -> str:
    """C++ condition that holds when argument ``arg`` has the allowed ``value``."""
    optional = arg.type.endswith("?")
    if value is None:
        return f"!{arg.name}.has_value()"
    if arg.type == "str":
        return f"{arg.name} == c10::string_view({_cpp_literal(value)})"
    if optional:
        return f"({arg.name}.has_value() && *{arg.name} == {_cpp_literal(value)})"
    return f"{arg.name} == {_cpp_literal(value)}"


def _ivalue(arg: _Arg, binding: AclnnBinding) -> str:
    """The boxed value the Meta call gets for ``arg``."""
    if arg.type in ("Tensor", "Tensor?"):
        return f"op_sdk_npu::meta({arg.name})"
    if binding.requires.get(arg.name, 0) is None and arg.type.endswith("?"):
        return "c10::IValue()"  # pinned to None
    if arg.type == "str":
        return f"c10::IValue(std::string({arg.name}))"
    if arg.type in ("int[]?",):
        return f"({arg.name}.has_value() ? c10::IValue({arg.name}->vec()) : c10::IValue())"
    if arg.type == "int[]":
        return f"c10::IValue({arg.name}.vec())"
    if arg.type == "bool[2]?":
        return (f"({arg.name}.has_value() ? c10::IValue(std::vector<bool>({arg.name}->begin(), "
                f"{arg.name}->end())) : c10::IValue())")
    return f"c10::IValue({arg.name})"


def generate_source(opdef, binding: AclnnBinding | None = None) -> str:
    """The binding's C++ source, generated from its declaration."""
    binding = binding or opdef.aclnn
    branches = _branch_plans(opdef, binding)
    sig = _schema(opdef)
    args, n_returns = sig.args, sig.n_returns
    protos = list({b.api: b.prototype for b, _ in branches}.values())
    canns = " / ".join(dict.fromkeys(p.cann for p in protos))
    fn = f"{opdef.name}_npu"
    aliased = sig.aliased
    if aliased[0] is not None:  # in place: the mutable argument itself (binding_plan: one)
        ret = "at::Tensor&"
    else:
        ret = "at::Tensor" if n_returns == 1 else f"std::tuple<{', '.join(['at::Tensor'] * n_returns)}>"
    params = ",\n    ".join(f"{'at::Tensor&' if a.mutable else _CPP_TYPES[a.type][0]} {a.name}"
                            for a in args)
    lines = [
        f"// OpPlugin-style eager binding of {opdef.qualname} to {' / '.join(binding.apis)} "
        f"(CANN {canns}).",
        f"// Generated by op_sdk.npu.binding from the aclnn= declaration in {opdef.module};",
        "// edit the declaration, not this file (a test keeps the two equal).",
        "// Built only where torch_npu is importable; registered only when the installed",
        f"// torch_npu does not define {opdef.qualname} (op_sdk.npu.build.load_bindings).",
    ]
    for proto in protos:
        lines += [f"// Prototype ({proto.source}):", f"//   {proto.signature()}"]
    lines += ['#include "binding.h"', ""]
    lines += [f"OPSDK_ACLNN_PROTOTYPE({p.api}, {', '.join(q.ctype for q in p.params)});"
              for p in protos]
    lines += ["", "namespace {", "", f"{ret} {fn}(", f"    {params}) {{"]
    by_name = {a.name: a for a in args}
    ivalues = ", ".join(_ivalue(a, binding) for a in args)
    if aliased[0] is not None:
        # nothing to allocate: the Meta function runs for its argument checks
        allocation = [f'  op_sdk_npu::meta_outputs("{opdef.qualname}", {{{ivalues}}});']
    else:
        allocation = [f'  auto outputs = op_sdk_npu::empty_outputs("{opdef.qualname}", '
                      f"{{{ivalues}}}, {_device_arg(args)});"]
        allocation += [f"  at::Tensor {name}_out = outputs[{i}];"
                       for i, name in enumerate(binding.outputs)]
    if len(branches) == 1:
        lines += _require_lines(opdef, binding, by_name, "  ")
        lines += allocation
        lines += _call_lines(binding, branches[0][1], by_name, "  ")
    else:  # one block per binding, selected by its when= values
        lines += allocation
        for k, (branch, plan) in enumerate(branches):
            cond = " && ".join(_values_condition(by_name[name], value)
                               for name, value in branch.when.items())
            lines.append(f"  if ({cond}) {{" if k == 0 else
                         f"  }} else if ({cond}) {{" if cond else "  } else {")
            lines += _require_lines(opdef, branch, by_name, "    ")
            lines += _call_lines(branch, plan, by_name, "    ")
        lines.append("  }")
    outs = ", ".join(f"{name}_out" if alias is None else alias
                     for name, alias in zip(binding.outputs, aliased))
    lines.append(f"  return {outs if n_returns == 1 else '{' + outs + '}'};")
    lines += ["}", "", "}  // namespace", "",
              f"TORCH_LIBRARY_IMPL({opdef.namespace}, PrivateUse1, m) {{",
              f'  m.impl("{opdef.name}", TORCH_FN({fn}));', "}", ""]
    return "\n".join(lines)


def _values_condition(arg: _Arg, value) -> str:
    values = value if isinstance(value, tuple) else (value,)
    conds = [_require_condition(arg, v) for v in values]
    return conds[0] if len(conds) == 1 else "(" + " || ".join(conds) + ")"


def _tensor_require_lines(opdef, binding: AclnnBinding, by_name, indent: str) -> list[str]:
    """The checks of ``tensor_requires=``, each naming its argument, the rule and the value."""
    proto = binding.prototype
    lines = []
    for name, rules in binding.tensor_requires.items():
        optional = by_name[name].type == "Tensor?"
        t = f"{name}->" if optional else f"{name}."
        for key, value in rules.items():
            if key == "min_dim":
                cond, rule, got = f"{t}dim() >= {value}", f"have at least {value} dims", f"{t}dim()"
            else:
                cond, rule, got = (f"{t}scalar_type() == {TENSOR_DTYPES[value]}", f"have dtype {value}",
                                   f"{t}scalar_type()")
            if optional:
                cond = f"!{name}.has_value() || {cond}"
            lines.append(f"{indent}TORCH_CHECK({cond},")
            lines.append(f'{indent}            "{opdef.qualname}: argument \'{name}\' must {rule} for '
                         f'op_sdk\'s binding to {proto.api} (CANN {proto.cann}), whose document '
                         f'requires it; got ", {got});')
    return lines


def _require_lines(opdef, binding: AclnnBinding, by_name, indent: str) -> list[str]:
    """The checks of ``requires=`` and ``tensor_requires=``, each naming its argument."""
    proto = binding.prototype
    lines = _tensor_require_lines(opdef, binding, by_name, indent)
    for name, value in binding.requires.items():
        values = value if isinstance(value, tuple) else (value,)
        cond = " || ".join(_require_condition(by_name[name], v) for v in values)
        shown = " or ".join("None" if v is None else repr(v) for v in values)
        lines.append(f"{indent}TORCH_CHECK({cond},")
        lines.append(f'{indent}            "{opdef.qualname}: argument \'{name}\' must be {shown} '
                     f'for op_sdk\'s binding to {proto.api} (CANN {proto.cann}), which has '
                     'no parameter for other values");')
    return lines


def _call_lines(binding: AclnnBinding, plan: list[_Bound], by_name, indent: str) -> list[str]:
    """The copies, the locals, the compile-time check and the EXEC_NPU_CMD_EXT call."""
    api = binding.api
    lines = [f"{indent}{name}_out.copy_({source});"  # the API updates the copy in place
             for name, source in binding.copy_of.items()]
    for b in plan:  # EXEC_NPU_CMD_EXT takes lvalues: constants and conversions become locals
        if b.kind == "constant" and b.param.ctype == "char*":  # a mutable string, as aclnn takes it
            lines.append(f"{indent}char {b.expr}_text[] = {b.target};")
            lines.append(f"{indent}char* {b.expr} = {b.expr}_text;")
        elif b.kind == "constant":
            lines.append(f"{indent}const {b.param.ctype.removeprefix('const ')} {b.expr} = "
                         f"{b.target};")
        elif b.kind == "dtype":
            ctype = b.param.ctype.replace("const ", "")
            if ctype == "aclDataType":
                lines.append(f"{indent}const at::ScalarType {b.expr} = {b.target}_out.scalar_type();")
            else:  # an int32_t / int64_t code: the aclDataType's value
                lines.append(f"{indent}const {ctype} {b.expr} = "
                             f"static_cast<{ctype}>(ConvertType({b.target}_out.scalar_type()));")
            continue
        elif b.kind == "output" and b.conversion:  # tagged with another aclDataType
            lines.append(f"{indent}const TensorWrapper {b.expr} = {{{b.target}_out, "
                         f"aclDataType::{b.conversion}}};")
            continue
        if b.default is not None:
            lines += [indent + line[2:] for line in _default_lines(by_name[b.target], b.default)]
        if b.conversion == C_STRING:  # aclnn takes char*: a NUL-terminated copy it may read
            lines.append(f"{indent}std::string {b.expr}_text({b.target});")
            lines.append(f"{indent}char* {b.expr} = {b.expr}_text.data();")
        elif b.conversion:
            value = f"{b.target}_value" if b.default is not None else b.target
            lines.append(f"{indent}const auto {b.expr} = {b.conversion}({', '.join((value,) + b.context)});")
    call = ", ".join(b.expr for b in plan)
    lines.append(f"{indent}OPSDK_CHECK_ACLNN_ARGS({api}, {call});")
    lines.append(f"{indent}EXEC_NPU_CMD_EXT({api}, {call});")
    return lines


def _default_lines(arg: _Arg, value) -> list[str]:
    """C++ for ``<arg>_value``: the optional argument's value, or ``value`` when it is None."""
    if arg.type == "int[]?":
        items = ", ".join(str(int(v)) for v in value)
        return [f"  const std::vector<int64_t> {arg.name}_default = {{{items}}};",
                f"  const at::IntArrayRef {arg.name}_value = {arg.name}.has_value() ? "
                f"*{arg.name} : at::IntArrayRef({arg.name}_default);"]
    cpp = {"int?": "int64_t", "float?": "double"}[arg.type]
    return [f"  const {cpp} {arg.name}_value = {arg.name}.value_or({_cpp_literal(value)});"]


def _device_arg(args: list[_Arg]) -> str:
    first = next(a for a in args if a.type == "Tensor")
    return f"{first.name}.device()"


_CALL = re.compile(r"EXEC_NPU_CMD_EXT\(\s*(\w+)\s*,(.*?)\);", re.S)


def _split_args(text: str) -> list[str]:
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch in "(<{[":
            depth += 1
        elif ch in ")>}]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return [a for a in out if a]


def check_source(opdef, source: str, binding: AclnnBinding | None = None) -> None:
    """Check the ``EXEC_NPU_CMD_EXT`` calls of a binding source against the prototypes:
    one call per binding (``when`` / ``otherwise``: in order), its API, the number of
    arguments, and, position by position, that each argument is what the parameter of that
    position takes. Raises BindingError naming the operator, the parameter and the
    argument."""
    binding = binding or opdef.aclnn
    branches = _branch_plans(opdef, binding)
    calls = _CALL.findall(source)
    if len(calls) != len(branches):
        raise _fail(opdef, binding, f"the source has {len(calls)} EXEC_NPU_CMD_EXT calls; "
                    f"rule: exactly {len(branches)}, one per declared API "
                    f"({', '.join(binding.apis)})")
    for (api, text), (branch, plan) in zip(calls, branches):
        if api != branch.api:
            raise _fail(opdef, branch, f"the source calls {api}; rule: the declared API")
        got = _split_args(text)
        if len(got) != len(plan):
            raise _fail(opdef, branch, f"the call passes {len(got)} arguments, the prototype "
                        f"has {len(plan)} ({branch.prototype.signature()}); rule: one argument "
                        "per parameter, workspaceSize and executor excluded")
        for i, (expr, bound) in enumerate(zip(got, plan)):
            if re.sub(r"\s+", "", expr) != re.sub(r"\s+", "", bound.expr):
                raise _fail(opdef, branch, f"argument {i + 1} is '{expr}', but parameter "
                            f"{i + 1} '{bound.param.name}' ({bound.param.ctype}) takes "
                            f"{bound.kind} '{bound.target}' ('{bound.expr}'); rule: the aclnn "
                            "argument order is the prototype's")


def binding_sources() -> dict[str, str]:
    """{operator name: path} of the binding sources in csrc/npu/."""
    return {os.path.basename(p)[:-4]: p for p in sorted(glob.glob(os.path.join(SOURCE_DIR, "*.cpp")))}
