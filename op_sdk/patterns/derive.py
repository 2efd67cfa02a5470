"""Fusions derived from operator declarations (``define_op(..., composite=)``).

``derived_variants(op, ...)`` turns a fused operator's ``Composite`` into a fusion's
variants: one per combination of the composite's axes, in order

* each step's spellings (``Composite.spellings``, or the fusion's own for a step),
* each default scalar spelled explicitly or left to its default (an explicit one is a
  pattern scalar, ``scalar_workaround``),
* each optional output used or unused,

or one per entry of ``forms`` (explicit combinations, which may also set literal
arguments such as ``perm_x1``). Each variant's ``search_fn`` calls the composite with
those choices and returns what it computes; its ``replace_fn`` calls the fused
operator with the same inputs, the explicit scalars, ``Composite.fixed`` and the literal
choices, and returns the same outputs (with the views a spelling moves onto them).

``register_fusion(op)`` gives a plugin operator its fusion with no pattern code: the
derived variants (plus, for compositions Inductor decomposes, their decomposed
spellings: max-autotune matches Inductor's post-grad graph, where ``aten.silu`` is
``x / (1 + exp(-x))``) go into the current pattern registry, traced at the first
compile that uses that registry.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from op_sdk.composite import Composite, Spelling, named_outputs
from op_sdk.patterns.fusion import Fusion, Variant, _positional

__all__ = ["derived_variants", "register_fusion", "materialize", "composite_of"]

LABELS = {"epsilon": "eps"}


def composite_of(op: str, namespace: str = "npu") -> tuple[Any, Composite]:
    """(the OpDef, its Composite) of a declared fused operator."""
    from op_sdk.library import get_op

    opdef = get_op(op, namespace)
    if opdef.composite is None:
        raise ValueError(f"op_sdk: {opdef.qualname} declares no composite= (its unfused "
                         "spelling), so no fusion can be derived from it")
    return opdef, opdef.composite


def _marker(default) -> Any:
    """The value that marks where an explicit scalar sits in a traced pattern (any value
    but the default, which the dispatcher would drop from the trace)."""
    if isinstance(default, bool):
        return not default
    if isinstance(default, int):
        return default + 7
    return 2e-6 if default != 2e-6 else 3e-6


def _spelling(s) -> Spelling:
    return s if isinstance(s, Spelling) else Spelling(s)


def _call_op(op: torch._ops.OpOverload, args: Mapping[str, Any]):
    """Call ``op`` with arguments by name, positionally where its schema allows."""
    pos, kw, skipped = [], {}, False
    for a in op._schema.arguments:
        if a.name not in args:
            skipped = skipped or not a.kwarg_only
            continue
        if a.kwarg_only or skipped:
            kw[a.name] = args[a.name]
        else:
            pos.append(args[a.name])
    return op(*pos, **kw)


def _learn(search: Callable, args) -> None:
    """Run ``search`` once outside any trace (on fake or real inputs) to learn its outputs."""
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    with torch.no_grad(), disable_proxy_modes_tracing():
        search(*args)


# the outputs each derived variant's search returns, learned from its first run
_LEARNED: dict[tuple, tuple[str, ...]] = {}


def _variant(name: str, opdef, comp: Composite, inputs: Sequence[str], rename: Mapping[str, str],
             steps: Mapping[str, Spelling], explicit: Sequence[str], unused: Sequence[str],
             literals: Mapping[str, Any]) -> Variant:
    # The two functions capture only names, literals and functions (never the declaration
    # objects), so that their content digest, part of a registry's cache key, exists, and
    # Dynamo (which traces a search function as a model in the tests) sees constants.
    params = inspect.signature(comp.fn).parameters
    argnames = tuple(rename.get(p, p) for p in inputs) + tuple(explicit)
    names = (*inputs, *explicit)
    qual = (opdef.namespace, opdef.name)
    unused = tuple(unused)
    literal_items = tuple(literals.items())
    key = (*qual, name, argnames, unused, repr(literal_items))
    step_fns = tuple((step, s.fn) for step, s in steps.items())
    views = tuple((out, tuple(s.outputs[out] for s in steps.values() if out in s.outputs))
                  for out in dict.fromkeys(o for s in steps.values() for o in s.outputs))
    moved_in = tuple((arg, tuple(s.inputs[arg] for s in steps.values() if arg in s.inputs))
                     for arg in dict.fromkeys(a for s in steps.values() for a in s.inputs))
    fn, outputs, required = comp.fn, tuple(comp.outputs), tuple(comp.required)
    fixed_items = tuple(comp.fixed.items())
    fixed_in_fn = tuple((k, v) for k, v in fixed_items if k in params)

    def search(*args):
        kw = {p: None for p in required}
        kw.update(zip(names, args))
        kw.update(fixed_in_fn)
        kw.update(literal_items)
        kw.update(step_fns)
        kept = [(n, v) for n, v in named_outputs(fn(**kw), outputs) if n not in unused]
        _LEARNED[key] = tuple(n for n, _ in kept)
        return kept[0][1] if len(kept) == 1 else tuple(v for _, v in kept)

    def replace(*args):
        if key not in _LEARNED:
            _learn(search, args)
        op_args = dict(zip(names, args))
        op_args.update(fixed_items)
        op_args.update((k, v) for k, v in literal_items if v is not None)
        for arg, fns in moved_in:
            for view in fns:
                op_args[arg] = view(op_args[arg])
        out = _call_op(getattr(getattr(torch.ops, qual[0]), qual[1]).default, op_args)
        outs = out if isinstance(out, (tuple, list)) else (out,)
        moved = dict(views)
        result = []
        for n in _LEARNED[key]:
            v = outs[outputs.index(n)] if outputs else outs[int(n)]
            for view in moved.get(n, ()):
                v = view(v)
            result.append(v)
        return result[0] if len(result) == 1 else tuple(result)

    scalars = {d: comp.markers.get(d, _marker(params[d].default)) for d in explicit}
    return Variant(name, _positional(search, argnames), _positional(replace, argnames),
                   scalars or None)


def derived_variants(op: str, *, namespace: str = "npu", inputs: Sequence[str] | None = None,
                     rename: Mapping[str, str] | None = None,
                     spellings: Mapping[str, Mapping[str, Any]] | None = None,
                     grid: Sequence[str] | None = None,
                     forms: Sequence[Mapping[str, Any]] | None = None,
                     name: Callable[[dict], str] | None = None,
                     labels: Mapping[str, str] | None = None) -> Callable[[], tuple[Variant, ...]]:
    """A ``Fusion.variants`` callable derived from ``op``'s ``Composite`` (built on first
    call, then cached: nothing is looked up or traced before).

    inputs:    the composite parameters that are pattern inputs (default: those without
               a default); the others are passed as None or their default.
    rename:    ``{parameter: pattern argument name}`` (what the fusion's example inputs use).
    spellings: ``{step: {label: Spelling or callable}}``, replacing the composite's
               alternatives of that step for this fusion.
    grid:      the order the axes vary in, outermost first (step names, default names,
               optional output names); the axes it leaves out vary inside, in the
               composite's order (steps, defaults, optional outputs).
    forms:     explicit combinations instead of the grid: dicts of axis -> choice, plus
               literal arguments of the composite (e.g. ``{"perm_x1": [1, 0, 2]}``).
    name:      the variant name of a combination (default: "+".join of the chosen step
               labels, the explicit defaults' labels and ``x`` / ``no_x`` per optional output).
    """
    rename = dict(rename or {})
    labels = {**LABELS, **(labels or {})}

    @functools.cache
    def variants() -> tuple[Variant, ...]:
        opdef, comp = composite_of(op, namespace)
        alternatives = {step: dict(alts) for step, alts in comp.spellings.items()}
        alternatives.update({step: dict(alts) for step, alts in (spellings or {}).items()})
        unknown = set(alternatives) - set(comp.steps)
        if unknown:
            raise ValueError(f"op_sdk.derived_variants({op}): no step {sorted(unknown)}; the "
                             f"composite's steps are {comp.steps}")
        axes: dict[str, tuple] = {step: tuple(alts) for step, alts in alternatives.items()}
        axes.update({d: (False, True) for d in comp.defaults})
        axes.update({o: (True, False) for o in comp.optional_outputs})
        order = list(grid or ()) + [a for a in axes if a not in (grid or ())]
        if len(order) != len(axes):
            raise ValueError(f"op_sdk.derived_variants({op}): grid {list(grid)} names axes "
                             f"that are not the composite's {list(axes)}")
        if forms is None:
            combos = [dict(zip(order, values)) for values in
                      itertools.product(*(axes[a] for a in order))]
        else:
            combos = [{**{a: vals[0] for a, vals in axes.items()}, **f} for f in forms]
        out = []
        for c in combos:
            literals = {k: v for k, v in c.items() if k not in axes}
            chosen = {step: _spelling(alternatives[step][c[step]]) for step in alternatives}
            explicit = [d for d in comp.defaults if c[d]]
            unused = [o for o in comp.optional_outputs if not c[o]]
            if name is not None:
                label = name(c)
            else:
                parts = [c[s] for s in alternatives if c[s]]
                parts += [labels.get(d, d) for d in explicit]
                parts += [o if c[o] else f"no_{o}" for o in comp.optional_outputs]
                label = "+".join(parts) or "composite"
            out.append(_variant(label, opdef, comp, tuple(inputs or comp.required), rename,
                                chosen, explicit, unused, literals))
        return tuple(out)

    return variants


# ---- plugin operators: register_fusion -------------------------------------------------------

# fusions registered for the process-wide user registry, and the registries that have them
# (tests and tools may replace the user registry: each one gets them at its first compile)
_FOR_USER: list[Fusion] = []
_PENDING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # registry -> [Fusion]
_DONE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # registry -> {fusion id}
_PENDING_LOCK = threading.Lock()


def _example_inputs(opdef, comp: Composite, shape: tuple[int, ...]) -> Callable:
    types = {a.name: a.type for a in opdef.op._schema.arguments}

    def make(dtype=torch.bfloat16, variant=None, **_):
        values = {}
        for p in comp.arguments:
            if isinstance(types.get(p), torch.TensorType):
                values[p] = torch.randn(shape, dtype=dtype)
        return values

    return make


def register_fusion(op, *, name: str | None = None, registry=None,
                    dtypes: Sequence[torch.dtype] = (torch.bfloat16, torch.float32),
                    example_inputs: Callable | None = None, checks: Sequence = (),
                    shape: tuple[int, ...] = (8, 64), lazy: bool = True, **derive: Any) -> Fusion:
    """Register the fusion derived from ``op``'s ``composite=`` (an ``OpDef``, an
    ``OpOverload`` or ``"namespace::name"``) into ``registry`` (default: the current one,
    as ``op_sdk.register_replacement`` does).

    Variants: those of ``derived_variants`` (``derive`` passes its options through) and,
    for each distinct graph Inductor's decompositions make of them (traced in each of
    ``dtypes``: half dtypes add converts to float32), a ``+decomposed`` one, so that the
    fusion applies in max-autotune too. ``example_inputs(dtype, variant)`` gives the
    tracing inputs by composite parameter name (default: ``torch.randn(shape)`` for each
    tensor input); ``checks`` are named ``Check``s vetoing a match.

    ``lazy`` (default): nothing is imported or traced now; the patterns are traced at the
    first compile whose backend uses that registry (about 0.1 s per variant). Returns
    the ``Fusion``."""
    from op_sdk.library import OpDef, get_op
    from op_sdk.patterns.registry import _SCOPES, current_registry

    if isinstance(op, str):
        ns, _, opname = op.rpartition("::")
        opdef = get_op(opname, ns or "npu")
    elif isinstance(op, OpDef):
        opdef = op
    else:
        ns, opname = op._schema.name.split("::")
        opdef = get_op(opname, ns)
    if opdef.composite is None:
        raise ValueError(f"op_sdk.register_fusion: {opdef.qualname} declares no composite=")
    comp = opdef.composite
    plain = derived_variants(opdef.name, namespace=opdef.namespace, **derive)
    fusion = Fusion(
        name=name or opdef.name, number=0, fused_op=opdef.name, unfused_ops=(),
        variants=functools.cache(lambda: _with_decomposed(fusion, plain())),
        example_inputs=example_inputs or _example_inputs(opdef, comp, shape),
        checks=tuple(checks), dtypes=tuple(dtypes), torchair_max_autotune=True,
        opaque_to_inductor=True, doc=f"derived from {opdef.qualname}'s composite")
    if registry is None and lazy and not _SCOPES.get():
        # the process-wide user registry, made (with Inductor) when a compile uses it
        with _PENDING_LOCK:
            _FOR_USER.append(fusion)
        return fusion
    target = registry if registry is not None else current_registry()
    if lazy:
        with _PENDING_LOCK:
            _PENDING.setdefault(target, []).append(fusion)
    else:
        _register_all(target, fusion)
    return fusion


def _with_decomposed(fusion: Fusion, plain: tuple[Variant, ...]) -> tuple[Variant, ...]:
    """``plain`` plus a ``+decomposed`` variant per distinct graph Inductor's
    decompositions make of one (per dtype of ``fusion.dtypes``)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from op_sdk.patterns.tracing import trace_canonical, trace_decomposed

    out = list(plain)
    for v in plain:
        seen = set()
        for dtype in fusion.dtypes:
            mode = FakeTensorMode()
            real = fusion.example_inputs(dtype, v)
            scalars = v.scalar_workaround or {}
            args = [mode.from_tensor(real[n]) if isinstance(real[n], torch.Tensor)
                    else scalars.get(n, real.get(n)) for n in v.argnames]
            with mode:
                code = trace_canonical(v.search_fn, args).code
                decomposed = trace_decomposed(v.search_fn, args).code
            if decomposed == code or decomposed in seen:
                continue
            label = f"{v.name}+decomposed" + (f"+{str(dtype).split('.')[-1]}" if seen else "")
            seen.add(decomposed)
            out.append(Variant(label, v.search_fn, v.replace_fn, v.scalar_workaround,
                               decompose=True, trace_dtype=dtype))
    return tuple(out)


def _register_all(registry, fusion: Fusion) -> None:
    from op_sdk.patterns.fusion import _register

    for variant in fusion.variants():
        _register(registry, fusion, variant)


def pending(registry) -> list[Fusion]:
    """The fusions waiting for ``registry``'s first compile."""
    from op_sdk.patterns.registry import user_registry

    with _PENDING_LOCK:
        waiting = list(_PENDING.get(registry, ()))
        if registry is user_registry():
            done = _DONE.get(registry, set())
            waiting += [f for f in _FOR_USER if id(f) not in done]
    return waiting


def materialize(registry) -> None:
    """Register the fusions ``register_fusion`` deferred to ``registry``'s first compile."""
    waiting = pending(registry)
    with _PENDING_LOCK:
        _PENDING.pop(registry, None)
        _DONE.setdefault(registry, set()).update(id(f) for f in waiting)
    for fusion in waiting:
        _register_all(registry, fusion)
