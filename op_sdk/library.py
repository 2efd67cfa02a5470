"""The operator definition API: one declaration per fused operator.

``define_op`` takes a schema and the Python pieces of an operator (reference, fake,
kernels per device, optional backward) and registers everything the dispatcher and
torch.compile need:

* the schema, in its namespace, unless torch_npu already defines it;
* the fake (Meta) function, only for operators this process defines itself;
* a kernel per device: a native (C++) kernel registered by ``op_sdk._C``, a Python
  kernel (Triton launchers, ATen compositions), or the reference as the fallback;
* Autograd{CPU,CUDA} kernels: the backward when one is given, otherwise a kernel that
  runs the operator below autograd and fails at backward time, as ATen's
  ``autogradNotImplementedFallback`` does;
* for an in-place operator paired with its functional twin (``functional=``): the CPU /
  CUDA kernels and the fake derived from the twin, and a Functionalize kernel
  (in-place -> functional + write back) so the operator works under torch.compile even
  though its schema returns an alias, which automatic functionalization rejects.

The SDK's own operators (``op_sdk.ops``) and user plugins (``examples/``) use the same call.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import threading
import warnings
from collections.abc import Callable
from typing import Any

import torch

from op_sdk.npu.runtime import has_schema, schema_of, torch_npu_module

__all__ = [
    "Benchmark",
    "OpDef",
    "define_op",
    "get_op",
    "registered_ops",
    "functionalize_inplace",
    "torch_npu_module",
]

_DISPATCH_KEYS = {"cpu": "CPU", "cuda": "CUDA"}
_AUTOGRAD_KEYS = {"cpu": "AutogradCPU", "cuda": "AutogradCUDA"}

_LIBRARIES: dict[str, torch.library.Library] = {}
_REGISTRY: dict[str, OpDef] = {}
# called with every OpDef once it is defined (op_sdk.converters attaches declared converters)
_DEFINE_HOOKS: list[Callable[[OpDef], None]] = []


def _library(namespace: str) -> torch.library.Library:
    lib = _LIBRARIES.get(namespace)
    if lib is None:
        lib = torch.library.Library(namespace, "FRAGMENT")  # noqa: TOR901
        _LIBRARIES[namespace] = lib
    return lib


def _has_schema(namespace: str, name: str) -> bool:
    return has_schema(f"{namespace}::{name}")


@dataclasses.dataclass(frozen=True)
class Benchmark:
    """How the kernel benchmark (benchmarks/bench_kernels.py, part of ``op-sdk bench``) times an
    operator against its alternatives: the operator itself, the unfused eager chain it
    replaces, torch.compile of its plain-PyTorch composite, and a copy of the same bytes.

    make:         ``(T, H, dtype) -> (args, kwargs)``: inputs of T rows and hidden size H
                  (for matmuls, H is the reduction dim K) in that dtype.
    unfused:      the eager baseline, called with the operator's arguments (default: the
                  reference, i.e. plain PyTorch).
    unfused_name: how the results name that baseline.
    composite:    what torch.compile compiles (default: the reference).
    shapes:       (T, H) pairs instead of the suite's grid; ``n`` the matmuls' output width.
    unread:       positional arguments the kernel does not read (left out of the bytes).
    """

    make: Callable[[int, int, torch.dtype], tuple[tuple, dict]]
    unfused: Callable | None = None
    unfused_name: str = "plain PyTorch (eager)"
    composite: Callable | None = None
    shapes: tuple[tuple[int, int], ...] | None = None
    n: int | None = None
    unread: tuple[int, ...] = ()


@dataclasses.dataclass
class OpDef:
    """Everything the SDK knows about one operator."""

    namespace: str
    name: str
    schema: str
    reference: Callable
    fake: Callable | None
    kernels: dict[str, Callable]
    native: tuple[str, ...]
    backward: Callable | None
    setup_context: Callable | None
    functional: str | None
    owned: bool = True  # False when torch_npu defined the schema
    doc: str = ""
    # devices listed in ``native`` whose C++ kernel is not loaded; the reference stands in
    native_missing: set[str] = dataclasses.field(default_factory=set)
    # dispatch key -> why op_sdk._C's kernel for it is not registered
    native_errors: dict[str, str] = dataclasses.field(default_factory=dict)
    benchmarks: tuple[Benchmark, ...] = ()
    # the Python module that declared it (``op_sdk.ops.<slice>`` for the SDK's own)
    module: str = ""
    # its OpPlugin-style eager binding (op_sdk.npu.AclnnBinding), or None
    aclnn: Any = None
    # what op_sdk.npu.build.load_bindings did with the binding ("registered", or why not)
    binding_status: str = ""
    # its unfused spelling (op_sdk.Composite), from which its fusion is derived, or None
    composite: Any = None
    # the class name of its autograd node (grad_fn), where torch_npu's is to be matched
    backward_name: str | None = None
    # its declared GE converter (op_sdk.converters.GeIr), or None
    ge: Any = None
    # whether its reference is also the operator op_sdk_reference::<name> (reference_op=True)
    reference_op: bool = False
    # the CUDA kernel torch.compile traces through (library.INLINE_DEVICES), or None
    inline: Callable | None = None

    @property
    def slice(self) -> str:
        """The name its files share (ops/<slice>.py, csrc/<slice>.cpp,
        tests/ops/test_<slice>.py, ...): its declaring module's last component."""
        return self.module.rsplit(".", 1)[-1]

    @property
    def qualname(self) -> str:
        return f"{self.namespace}::{self.name}"

    @property
    def packet(self) -> str:
        """Its name without the overload ("npu_format_cast" of "npu_format_cast.Tensor")."""
        return self.name.partition(".")[0]

    @property
    def overload(self) -> str:
        """Its overload name: "default", or what its schema names after the dot."""
        return self.name.partition(".")[2] or "default"

    @property
    def op(self) -> torch._ops.OpOverload:
        return getattr(getattr(getattr(torch.ops, self.namespace), self.packet), self.overload)

    @property
    def mutated_args(self) -> list[str]:
        return [a.name for a in self.op._schema.arguments
                if a.alias_info is not None and a.alias_info.is_write]

    def kernel_devices(self) -> dict[str, str]:
        """Map each device with a kernel to where it comes from: native, triton, python or
        reference."""
        out = {}
        for device, key in _DISPATCH_KEYS.items():
            if device in self.kernels:
                out[device] = getattr(self.kernels[device], "kind", "python")
            elif device in self.native and device not in self.native_missing:
                out[device] = "native"
            elif torch._C._dispatch_has_kernel_for_dispatch_key(self.qualname, key):
                out[device] = "reference"
        return out

    def __call__(self, *args, **kwargs):
        return self.op(*args, **kwargs)


def get_op(name: str, namespace: str = "npu") -> OpDef:
    return _REGISTRY[f"{namespace}::{name}"]


def registered_ops() -> list[OpDef]:
    return list(_REGISTRY.values())


def define_op(
    schema: str,
    *,
    reference: Callable,
    fake: Callable | None = None,
    kernels: dict[str, Callable] | None = None,
    native: tuple[str, ...] = (),
    backward: Callable | None = None,
    setup_context: Callable | None = None,
    functional: str | None = None,
    namespace: str = "npu",
    doc: str = "",
    benchmarks: tuple[Benchmark, ...] = (),
    aclnn: Any = None,
    ge=None,
    composite=None,
    backward_name: str | None = None,
    reference_op: bool = False,
    inline: bool = True,
) -> OpDef:
    """Declare and register one operator.

    schema:        ``"name(args) -> returns"`` in the dispatcher's schema language;
                   ``"name.overload(args) -> returns"`` declares one overload (each overload
                   of a name is its own ``define_op``, its OpDef named "name.overload").
    reference:     plain-PyTorch implementation; the kernel of last resort on every
                   device, and the ground truth of the tests and benchmarks.
    fake:          shape / dtype function for FakeTensor and Meta. Defaults to the
                   reference (fine when it does no data-dependent work).
    kernels:       ``{"cpu": fn, "cuda": fn}`` Python kernels (Triton launchers, ...).
    native:        devices whose kernels ``op_sdk._C`` registers from C++.
    backward / setup_context: as for ``torch.library.register_autograd``.
    functional:    for an in-place operator, the name of its functional twin (same
                   namespace, same arguments); the in-place kernels, fake and
                   functionalization are derived from it.
    benchmarks:    how the kernel benchmark times it (``Benchmark``), one per case.
    aclnn:         its OpPlugin-style eager binding on the NPU
                   (``op_sdk.npu.AclnnBinding``): checked here against the pinned
                   aclnn prototype and the schema (``BindingError`` otherwise); its C++ is
                   generated into csrc/npu/ and registered only where torch_npu lacks the
                   operator.
    ge:            its GE converter, declared (``op_sdk.converters.GeIr``): the Ascend IR
                   prototype and converter are derived from the schema (docs/converters.md).
    composite:     its unfused spelling (``op_sdk.Composite``): the chain of unfused
                   operators it replaces, from which the fusion's search patterns and
                   replacement are derived (``op_sdk.patterns.derive``, docs/fusions.md).
                   Nothing is traced here.
    backward_name: the class name of its autograd node (``y.grad_fn``), as torch_npu names
                   its own (``NpuDtypeCastBackward0``); torch.library's otherwise.
    inline:        whether torch.compile may trace through its kernel on the devices of
                   ``INLINE_DEVICES`` (False: the call stays one call everywhere, for an
                   operator whose kernel does more than compute its outputs, as
                   npu_format_cast records the format of its result's storage).
    reference_op:  also register the reference as the operator
                   ``op_sdk_reference::<name>`` (the same schema), which a native launcher
                   calls for the forms it routes off its hot path (csrc/registry.h,
                   ``reference_op``): those forms then have one implementation, the reference.
    """
    name = schema.split("(", 1)[0].strip()
    qualname = f"{namespace}::{name}"
    if qualname in _REGISTRY:
        raise RuntimeError(f"op_sdk.define_op: {qualname} is already defined by op_sdk")
    kernels = dict(kernels or {})
    for kernel in kernels.values():  # a Triton kernel where Triton is missing: the reference
        if getattr(kernel, "kind", None) == "triton" and kernel.fallback is None:
            kernel.fallback = reference
    for device in list(kernels) + list(native):
        if device not in _DISPATCH_KEYS:
            raise ValueError(f"op_sdk.define_op({name}): unknown device {device!r}; "
                             f"choose from {sorted(_DISPATCH_KEYS)}")
    opdef = OpDef(namespace, name, schema, reference, fake, kernels, tuple(native),
                  backward, setup_context, functional, doc=doc, benchmarks=tuple(benchmarks),
                  module=sys._getframe(1).f_globals.get("__name__", ""), aclnn=aclnn,
                  backward_name=backward_name)
    if composite is not None:
        from op_sdk.composite import Composite

        if not isinstance(composite, Composite):
            raise TypeError(f"op_sdk.define_op({name}): composite= must be an op_sdk.Composite, "
                            f"got {type(composite).__name__}")
        opdef.composite = composite
    if aclnn is not None:
        if "." in name:
            raise ValueError(f"op_sdk.define_op({name}): an OpPlugin binding of one overload is "
                             "not supported (its C++ is named and registered per operator name)")
        from op_sdk.npu.binding import check_binding

        check_binding(opdef, aclnn)
    lib = _library(namespace)

    if namespace == "npu":
        torch_npu_module()
    opdef.owned = not _has_schema(namespace, name)
    if opdef.owned:
        lib.define(schema)
    else:
        _check_same_schema(opdef)

    if functional is not None:
        _pair_inplace(opdef, lib)
    else:
        if _needs_fake(opdef):
            torch.library.register_fake(qualname, fake or reference, lib=lib)
        if native:
            _register_native(opdef)
        for device, key in _DISPATCH_KEYS.items():
            if device in kernels:
                lib.impl(name, kernels[device], key)
                if inline:
                    _inline_when_compiled(opdef, device, lib,
                                          getattr(kernels[device], "traced", None))
            elif device in native and device not in opdef.native_missing:
                continue
            elif not torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key):
                lib.impl(name, reference, key)  # also where a native kernel is missing
                if inline:
                    _inline_when_compiled(opdef, device, lib, reference)
        _register_autograd(opdef, lib)

    if reference_op:
        _define_reference_op(opdef)
        opdef.reference_op = True
    _REGISTRY[qualname] = opdef
    if aclnn is not None and torch_npu_module() is not None:
        from op_sdk.npu.build import load_bindings

        load_bindings([opdef])  # only where torch_npu lacks the operator
    opdef.ge = ge
    for hook in list(_DEFINE_HOOKS):
        hook(opdef)
    return opdef


# devices on which torch.compile traces through an operator's Python kernel (a Triton
# launcher, whose launches Inductor then compiles and makes itself, or the reference, which
# Inductor fuses) instead of calling it: on CUDA. On CPU the operator stays one call of its
# C++ kernel. Remove a device (before compiling: Inductor's caches do not key on this) to
# keep its operators opaque calls; ``inline_calls(False)`` does it for the traces inside.
INLINE_DEVICES = {"cuda"}
_inline_state = threading.local()


@contextlib.contextmanager
def inline_calls(enabled: bool):
    """Whether the graphs traced inside trace through the operators (on INLINE_DEVICES) or
    keep each one call. op_sdk's backend keeps them calls where no Inductor compiles the
    graph (its reduce-overhead and run_eagerly executors run the calls as they stand) and
    while its fusion passes match them, then traces through those left (compiler/inline.py)."""
    prev = getattr(_inline_state, "off", False)
    _inline_state.off = not enabled
    try:
        yield
    finally:
        _inline_state.off = prev


def tensors_device(values) -> str | None:
    """The device type of the tensors among ``values`` when there are some and they share
    one, else None."""
    devices = {v.device.type for v in values if isinstance(v, torch.Tensor)}
    return devices.pop() if len(devices) == 1 else None


def traced_through(op, device: str) -> bool:
    """Whether torch.compile traces through ``op`` (an OpOverload) on ``device`` tensors."""
    opdef = _REGISTRY.get(op.name()) if isinstance(op, torch._ops.OpOverload) else None
    return opdef is not None and opdef.inline is not None and device in INLINE_DEVICES


def _inline_when_compiled(opdef: OpDef, device: str, lib: torch.library.Library,
                          kernel: Callable | None) -> None:
    """Under AOTAutograd's functional tracing (``FunctionalTensorMode``, torch.compile), a
    call of the operator whose tensors are all on ``device`` is traced through ``kernel``
    rather than recorded as one call: the rule ``torch.library.triton_op`` registers for its
    operators. Elsewhere (another device, torch.export, which keeps custom operators for the
    ONNX translations and other exporters, another tensor subclass, the device taken out of
    ``INLINE_DEVICES``) the call stays as it is."""
    if kernel is None or device not in INLINE_DEVICES:
        return
    opdef.inline = kernel
    from torch._subclasses import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor, FunctionalTensorMode

    known = (FakeTensor, FunctionalTensor)

    def rule(mode, func, types, args, kwargs):
        if (device not in INLINE_DEVICES or getattr(_inline_state, "off", False)
                or torch.compiler.is_exporting()
                or any(t is not torch.Tensor and not issubclass(t, known) for t in types)
                or tensors_device(torch.utils._pytree.tree_leaves((args, kwargs))) != device):
            return mode.__torch_dispatch__(func, types, args, kwargs)
        try:
            with mode:
                return kernel(*args, **kwargs)
        except Exception as exc:
            if not isinstance(exc, _data_dependent()):
                raise
            # a form whose rules read values (MoE group_index counts, ...): a traced graph
            # cannot hold the read, so the call stays one call (what it traced so far has no
            # user and is dropped as dead code)
            return mode.__torch_dispatch__(func, types, args, kwargs)

    torch.library.register_torch_dispatch(opdef.qualname, FunctionalTensorMode, rule, lib=lib)


@functools.lru_cache(maxsize=None)
def _data_dependent() -> tuple[type, ...]:
    """What tracing raises where a kernel's rules read a value."""
    from torch._subclasses.fake_tensor import DataDependentOutputException
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return (DataDependentOutputException, GuardOnDataDependentSymNode)


REFERENCE_NAMESPACE = "op_sdk_reference"


def _define_reference_op(opdef: OpDef) -> None:
    """``op_sdk_reference::<name>``: the operator's reference as an operator of its own, for
    the native launcher to call (a CompositeExplicitAutograd kernel, so the call runs the
    reference whatever the inputs' device; fake: the operator's)."""
    lib = _library(REFERENCE_NAMESPACE)
    if not _has_schema(REFERENCE_NAMESPACE, opdef.name):
        lib.define(opdef.schema)
    lib.impl(opdef.name, opdef.reference, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{REFERENCE_NAMESPACE}::{opdef.name}", opdef.fake or opdef.reference,
                                lib=lib)


def on_define(hook: Callable[[OpDef], None]) -> None:
    """Call ``hook(opdef)`` for every operator defined already and every one defined from
    now on: how a layer above the library (op_sdk.converters) adds to each definition
    without the library importing it."""
    _DEFINE_HOOKS.append(hook)
    for opdef in list(_REGISTRY.values()):
        hook(opdef)


def _needs_fake(opdef: OpDef) -> bool:
    """Whether op_sdk registers the operator's fake: where it defines the operator, or where
    the library that does (torch_npu) has no Meta kernel of it (npu_format_cast,
    get_npu_format), so that torch.compile can trace it there too."""
    return opdef.owned or not torch._C._dispatch_has_kernel_for_dispatch_key(opdef.qualname, "Meta")


def _check_same_schema(opdef: OpDef) -> None:
    theirs = schema_of(opdef.qualname)
    ours = torch._C.parse_schema(f"{opdef.qualname}{opdef.schema[len(opdef.name):]}")
    if str(theirs) != str(ours):
        warnings.warn(f"op_sdk: {opdef.qualname} is already defined with schema {theirs}, "
                      f"op_sdk expects {ours}; keeping the existing definition", stacklevel=3)


def _register_native(opdef: OpDef) -> None:
    """Register the C++ kernels of ``op_sdk._C`` for this operator. A kernel that cannot be
    registered (the extension is missing, or another library registered a kernel with a
    different C++ signature) is reported, and the reference or the Python autograd kernel
    stands in for it: never a crash."""
    from op_sdk import _native

    errors = _native.register(opdef.namespace, opdef.name)
    if not errors:
        return
    if "CPU" in errors:
        opdef.native_missing.add("cpu")
    opdef.native_errors.update(errors)
    if _native.load():  # a missing extension was reported once, at load
        details = "; ".join(f"{key}: {' '.join(err.split())}" for key, err in errors.items())
        warnings.warn(f"op_sdk: native kernels of {opdef.qualname} not registered ({details}); "
                      "the plain-PyTorch reference runs instead", RuntimeWarning, stacklevel=4)


def _name_backward(kernel, name: str) -> None:
    """Name the autograd node class of the autograd.Function that torch.library's kernel
    applies (held in the kernel's closure)."""
    for cell in kernel.__closure__ or ():
        fn = cell.cell_contents
        if isinstance(fn, type) and issubclass(fn, torch.autograd.Function):
            fn._backward_cls.__name__ = fn._backward_cls.__qualname__ = name
            return
    raise RuntimeError(f"op_sdk.define_op: cannot name the backward node {name}: "
                       "torch.library's autograd kernel holds no autograd.Function")


def _register_autograd(opdef: OpDef, lib: torch.library.Library) -> None:
    info = torch._library.autograd.Info(opdef.backward, opdef.setup_context)
    kernel = torch._library.autograd.make_autograd_impl(opdef.op, info)
    if opdef.backward_name is not None:
        _name_backward(kernel, opdef.backward_name)
    if opdef.backward is not None:
        # Under the Autograd alias: it serves AutogradCPU / AutogradCUDA unless a C++
        # kernel takes them (op_sdk._C's no-grad fast path, which passes calls that record
        # a graph on to this kernel through AutogradOther, which the alias also covers).
        lib.impl(opdef.name, kernel, "Autograd", with_keyset=True)
        return
    for key in _AUTOGRAD_KEYS.values():
        # a C++ registration (op_sdk._C, torch_npu) is kept: it is faster and it owns the op
        if torch._C._dispatch_has_kernel_for_dispatch_key(opdef.qualname, key):
            continue
        lib.impl(opdef.name, kernel, key, with_keyset=True)


# ---------------------------------------------------------------------------------------
# In-place operators


class _InplaceLayout:
    """How an in-place operator's schema relates to its functional twin's outputs: the twin
    returns the in-place operator's own (non-alias) returns first, in order, then the new
    values of its mutated arguments in schema order (torch_npu's convention:
    npu_add_rms_norm_v2(x1!, x2!) -> rstd pairs with npu_add_rms_norm_v2_functional ->
    (rstd, new x1, new x2); npu_scatter_nd_update_(input!) -> input with
    npu_scatter_nd_update -> new input)."""

    def __init__(self, schema: torch._C.FunctionSchema):
        args = schema.arguments
        self.names = [a.name for a in args]
        self.kwarg_only = {a.name for a in args if a.kwarg_only}
        # the arguments it writes, in schema order, with their alias sets
        sets = {a.name: a.alias_info.before_set for a in args
                if a.alias_info is not None and a.alias_info.is_write}
        self.mutated = list(sets)
        # each return: the name of the mutated argument it aliases, or None (a new value)
        self.returns = [next((n for n, s in sets.items() if r.alias_info is not None
                              and r.alias_info.before_set == s), None) for r in schema.returns]
        self.values = sum(r is None for r in self.returns)

    def targets(self, args, kwargs) -> list:
        bound = _bind(self.names, self.kwarg_only, args, kwargs)
        return [bound[n] for n in self.mutated]

    def split(self, outs) -> tuple[tuple, tuple]:
        """The twin's outputs -> (the in-place operator's own values, the new values)."""
        outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
        return outs[:self.values], outs[self.values:]

    def result(self, targets, values):
        """The in-place operator's return value: its aliases and its own values."""
        it = iter(values)
        out = [targets[self.mutated.index(r)] if r is not None else next(it)
               for r in self.returns]
        return out[0] if len(out) == 1 else tuple(out)


def functionalize_inplace(inplace: torch._ops.OpOverload, functional: torch._ops.OpOverload,
                          lib: torch.library.Library | None = None) -> None:
    """Register a Functionalize kernel for an in-place op, from its functional twin.

    Automatic functionalization (``auto_functionalized``) refuses operators that return
    an alias of a mutated input, so such an operator needs this: call the functional
    twin on the unwrapped values, then replace each mutated input's value with the
    result, which AOTAutograd turns into a copy back into the graph input. An in-place
    operator that returns new values (npu_add_rms_norm_v2) takes the same path, so that its
    graphs hold the twin (TorchAir's re-inplace pass pairs the two the same way).
    ``functional`` returns the in-place operator's own returns, then the new value(s) of
    the mutated argument(s) in schema order (``_InplaceLayout``).
    """
    layout = _InplaceLayout(inplace._schema)
    if not layout.mutated:
        raise ValueError(f"functionalize_inplace: {inplace._schema.name} mutates no argument")
    ns, opname = inplace._schema.name.split("::")
    if inplace._schema.overload_name:
        opname = f"{opname}.{inplace._schema.overload_name}"
    lib = lib or _library(ns)

    def kernel(*args, **kwargs):
        from torch._subclasses.functional_tensor import CppFunctionalizeAPI

        ctx = CppFunctionalizeAPI()
        targets = layout.targets(args, kwargs)
        uargs, ukwargs = ctx.unwrap_tensors((args, kwargs))
        with ctx.redispatch_to_next():
            values, new_values = layout.split(functional(*uargs, **ukwargs))
        for target, value in zip(targets, new_values):
            ctx.replace(target, value)
            ctx.commit_update(target)
            ctx.sync(target)
        return layout.result(targets, ctx.wrap_tensors(values))

    lib.impl(opname, kernel, "Functionalize")


def _bind(names, kwarg_only, args, kwargs) -> dict[str, Any]:
    bound = dict(zip([n for n in names if n not in kwarg_only], args))
    bound.update(kwargs)
    return bound


def check_writable(op: str, arg: str, t: torch.Tensor) -> None:
    """An in-place operator's destination must not have elements that share memory (an
    expanded, stride-0 tensor): the rule of every in-place operator, before anything is
    written."""
    if torch._debug_has_internal_overlap(t) == 1:
        raise RuntimeError(f"{op}: argument '{arg}' must not have elements that share memory "
                           f"(an expanded tensor, strides {list(t.stride())} for shape "
                           f"{list(t.shape)}); clone() it first")


def _pair_inplace(opdef: OpDef, lib: torch.library.Library) -> None:
    """Derive the in-place operator's kernels from its functional twin (``_InplaceLayout``:
    the twin returns the operator's own values, then the new values of what it mutates)."""
    packet, _, overload = opdef.functional.partition(".")
    functional = getattr(getattr(getattr(torch.ops, opdef.namespace), packet), overload or "default")
    layout = _InplaceLayout(opdef.op._schema)

    def writable(args, kwargs):
        targets = layout.targets(args, kwargs)
        for name, dst in zip(layout.mutated, targets):
            check_writable(opdef.name, name, dst)
        return targets

    def fake(*args, **kwargs):
        targets = writable(args, kwargs)
        values, _ = layout.split(functional(*args, **kwargs))  # runs the twin's shape checks
        return layout.result(targets, values)

    def eager(*args, **kwargs):
        targets = writable(args, kwargs)
        values, new_values = layout.split(functional(*args, **kwargs))
        with torch.no_grad():
            for dst, new in zip(targets, new_values):
                dst.copy_(new)
        return layout.result(targets, values)

    def no_autograd(keyset, *args, **kwargs):
        targets = layout.targets(args, kwargs)
        for name, dst in zip(layout.mutated, targets):
            if torch.is_grad_enabled() and dst.requires_grad:
                raise RuntimeError(f"{opdef.name}: argument '{name}' requires grad; the "
                                   "in-place operator has no derivative. Use it under "
                                   "torch.no_grad()")
        with torch._C._AutoDispatchBelowAutograd():
            out = opdef.op.redispatch(keyset & torch._C._after_autograd_keyset, *args, **kwargs)
        for dst in targets:
            torch.autograd.graph.increment_version(dst)
        return out

    if _needs_fake(opdef):
        torch.library.register_fake(opdef.qualname, opdef.fake or fake, lib=lib)
    for device, key in _DISPATCH_KEYS.items():
        lib.impl(opdef.name, opdef.kernels.get(device, eager), key)
    for key in _AUTOGRAD_KEYS.values():
        lib.impl(opdef.name, no_autograd, key, with_keyset=True)
    functionalize_inplace(opdef.op, functional, lib)
