"""How a default fusion is declared, and the lazily built registry of each.

A ``Fusion`` is data: the fused operator, the operators that disappear, its variants
(each a pair of plain functions ``search_fn`` / ``replace_fn`` over the graph's
operators, with example inputs), and its named extra checks. Everything else (the
pattern, the registry, the reports, ``verify_replacement`` in the tests) is derived
from that, so adding a fusion means writing one module like ``add_rms_norm_cast.py``.
The default fusions' variants are themselves derived from their fused operators'
declarations (``define_op(..., composite=)``, ``derive.derived_variants``); a module
lists only the spelling options particular to it, its checks and its example inputs.

Patterns are derived by tracing ``search_fn`` in the canonical spelling and ignoring
literal ints, floats, lists and dtypes (as Inductor does); what those literals must be
(view sizes, transpose dims, the cast dtype, quantize's axis and dtype) is then the job
of named checks, which work with symbolic sizes and report why a match was refused.
The pattern is registered pre-traced (``search_fn_pattern``), so a match costs no re-trace
of ``search_fn``, and the replacement is traced once per distinct input metadata per
graph (``PatternRegistry``), not once per match.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import torch

from op_sdk.patterns.diagnostics import Check
from op_sdk.patterns.registry import PatternRegistry
from op_sdk.patterns.tracing import trace_canonical, trace_decomposed

__all__ = ["Variant", "Fusion", "IGNORED_LITERALS", "generated_variant", "EPSILON"]

# literal argument types a derived pattern does not compare (checks do instead)
IGNORED_LITERALS = (int, float, list, torch.device, torch.dtype)


@dataclasses.dataclass(frozen=True)
class Variant:
    """One spelling of a fusion: ``search_fn`` (what the graph holds) and ``replace_fn``
    (same signature, what replaces it). Parameters named in ``scalar_workaround`` are
    scalars (epsilon) matched as pattern arguments."""

    name: str
    search_fn: Callable
    replace_fn: Callable
    scalar_workaround: dict[str, float] | None = None
    # traced with Inductor's decompositions (the post-grad spelling of max-autotune), in
    # ``trace_dtype`` (default: the fusion's first dtype)
    decompose: bool = False
    trace_dtype: torch.dtype | None = None

    @property
    def argnames(self) -> list[str]:
        return list(inspect.signature(self.search_fn).parameters)


# any float: it only marks where an explicit epsilon sits in the traced pattern
EPSILON = {"epsilon": 2e-6}


def _positional(body: Callable, argnames: tuple[str, ...]) -> Callable:
    """A function of exactly ``argnames`` (positional) that calls ``body`` with them: the
    pattern matcher reads a search / replace function's parameter names."""
    def fn(*args):
        return body(*args)

    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in argnames])
    return fn


def generated_variant(name: str, search: Callable, replace: Callable, argnames: tuple[str, ...],
                      epsilon: bool = False) -> Variant:
    """A variant generated from two bodies over ``argnames`` plus ``eps_args``, a tuple
    that is ``(epsilon,)`` when the variant spells epsilon explicitly (an extra trailing
    parameter, matched as a scalar) and ``()`` when the graph relies on the default. One
    body pair then yields every spelling a fusion module lists as a grid of options."""
    if epsilon:
        names = (*argnames, "epsilon")
        return Variant(name, _positional(lambda *a: search(*a[:-1], (a[-1],)), names),
                       _positional(lambda *a: replace(*a[:-1], (a[-1],)), names), EPSILON)
    return Variant(name, _positional(lambda *a: search(*a, ()), argnames),
                   _positional(lambda *a: replace(*a, ()), argnames))


@dataclasses.dataclass(frozen=True)
class Fusion:
    """A default fusion of the TorchAir manual's table (``number`` is its row)."""

    name: str
    number: int
    fused_op: str                          # in torch.ops.npu, or "namespace::name"
    unfused_ops: tuple[str, ...]           # "npu.x" / "aten.x": gone after the fusion
    variants: Callable[[], tuple[Variant, ...]]
    example_inputs: Callable[..., dict[str, Any]]  # (dtype, variant) -> {argname: value}
    checks: tuple[Check, ...]
    dtypes: tuple[torch.dtype, ...]        # activation dtypes the fused op takes
    torchair_max_autotune: bool            # TorchAir applies it in max-autotune
    opaque_to_inductor: bool               # it crosses a custom op Inductor cannot fuse across
    doc: str = ""
    # fusions whose pattern is a part of this one's: a compile applies this one first (else
    # the part would fire and leave nothing to match; fusion 9 contains fusion 6's chain)
    before: tuple[str, ...] = ()

    @property
    def fused_qualname(self) -> str:
        """The fused operator as "namespace::name" (a bare name is torch.ops.npu's)."""
        return self.fused_op if "::" in self.fused_op else f"npu::{self.fused_op}"

    @property
    def fused_overload(self) -> torch._ops.OpOverload:
        ns, name = self.fused_qualname.split("::")
        return getattr(getattr(torch.ops, ns), name).default

    def variant(self, name: str) -> Variant:
        for v in self.variants():
            if v.name == name:
                return v
        raise KeyError(f"{self.name} has no variant {name!r}; variants: "
                       f"{[v.name for v in self.variants()]}")

    def inputs(self, variant: Variant, dtype: torch.dtype = torch.float16, **sizes) -> list:
        """Real example inputs in ``variant.search_fn``'s parameter order."""
        values = self.example_inputs(dtype, variant, **sizes)
        return [values[name] for name in variant.argnames]

    def registry(self) -> PatternRegistry:
        """This fusion's patterns, registered once per process on first use."""
        return _build(self)


_BUILT: dict[str, PatternRegistry] = {}
_BUILD_SECONDS: dict[str, float] = {}
_LOCK = threading.Lock()


def _build(fusion: Fusion) -> PatternRegistry:
    registry = _BUILT.get(fusion.name)
    if registry is not None:
        return registry
    with _LOCK:
        if fusion.name in _BUILT:
            return _BUILT[fusion.name]
        start = time.perf_counter()
        registry = PatternRegistry(fusion.name)
        for variant in fusion.variants():
            _register(registry, fusion, variant)
        _BUILD_SECONDS[fusion.name] = time.perf_counter() - start
        _BUILT[fusion.name] = registry
        return registry


def built_fusions() -> dict[str, float]:
    """The fusions registered so far in this process, with the seconds each took."""
    return dict(_BUILD_SECONDS)


def _register(registry: PatternRegistry, fusion: Fusion, variant: Variant) -> None:
    from torch._inductor.pattern_matcher import gen_pattern_and_search_gm
    from torch._subclasses.fake_tensor import FakeTensorMode

    scalars = variant.scalar_workaround or {}
    mode = FakeTensorMode()
    real = fusion.example_inputs(variant.trace_dtype or fusion.dtypes[0], variant)
    fake = [mode.from_tensor(real[n]) if isinstance(real[n], torch.Tensor) else real[n]
            for n in variant.argnames if n not in scalars]
    trace = trace_decomposed if variant.decompose else trace_canonical
    with mode:
        pattern, _ = gen_pattern_and_search_gm(variant.search_fn, fake, trace, scalars)
    registry.register_replacement(
        variant.search_fn, variant.replace_fn, fake, trace_fn=trace_canonical,
        search_fn_pattern=pattern, scalar_workaround=scalars or None,
        fusion=fusion.name, variant=variant.name, checks=fusion.checks, fused_op_check=True)
