"""Fusion patterns: the five default fusions of TorchAir's manual, scoped pattern
registries, ``register_replacement`` and ``verify_replacement``.

Importing this package registers nothing: each default fusion's patterns are traced the
first time a compile needs them (``Fusion.registry()``), once per process, and
``torch._inductor`` is imported only then.

``DEFAULT_FUSIONS`` is the table the compiler, the tests and the benchmarks read.
"""

from __future__ import annotations

import importlib
import pkgutil

from op_sdk.patterns.fusion import Fusion, Variant, built_fusions
from op_sdk.patterns.registry import (
    DuplicatePatternError,
    PatternRegistry,
    current_registry,
    register_replacement,
    user_registry,
)
from op_sdk.patterns.verify import ReplacementMismatch, verify_replacement

__all__ = ["DEFAULT_FUSIONS", "APPLY_ORDER", "Fusion", "Variant", "PatternRegistry",
           "register_replacement", "verify_replacement", "ReplacementMismatch", "DuplicatePatternError",
           "current_registry", "user_registry", "register_default_patterns", "built_fusions",
           "get_fusion"]

# In the manual's order (a compile applies them in this order but for ``Fusion.before``:
# APPLY_ORDER).
# Every module of this package that declares ``FUSION = Fusion(...)`` is a default fusion
# (a new fusion is a new module: nothing else lists it), ordered by ``Fusion.number``.


def _discover() -> tuple[Fusion, ...]:
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        fusion = getattr(module, "FUSION", None)
        if isinstance(fusion, Fusion):
            found.append(fusion)
    numbers = [f.number for f in found]
    if len(set(numbers)) != len(numbers):
        raise RuntimeError(f"op_sdk.patterns: two fusions share a number: {sorted(numbers)}")
    return tuple(sorted(found, key=lambda f: f.number))


DEFAULT_FUSIONS: tuple[Fusion, ...] = _discover()


def _apply_order(fusions: tuple[Fusion, ...]) -> tuple[Fusion, ...]:
    """The fusions in the order a compile applies them: by number, except that a fusion is
    moved before those it names in ``before`` (the smaller patterns it contains)."""
    order = list(fusions)
    names = {f.name for f in order}
    for f in fusions:
        unknown = set(f.before) - names
        if unknown:
            raise RuntimeError(f"op_sdk.patterns: fusion {f.name!r} is applied before "
                               f"{sorted(unknown)}, which are not fusions")
        first = min((i for i, g in enumerate(order) if g.name in f.before), default=None)
        if first is not None and order.index(f) > first:
            order.remove(f)
            order.insert(first, f)
    return tuple(order)


APPLY_ORDER: tuple[Fusion, ...] = _apply_order(DEFAULT_FUSIONS)


def get_fusion(name: str) -> Fusion:
    for f in DEFAULT_FUSIONS:
        if f.name == name:
            return f
    raise KeyError(f"no default fusion {name!r}; fusions: {[f.name for f in DEFAULT_FUSIONS]}")


def register_default_patterns() -> dict[str, PatternRegistry]:
    """Trace and register every default fusion now (normally done lazily, per fusion)."""
    return {f.name: f.registry() for f in DEFAULT_FUSIONS}
