"""Fusion patterns: the five default fusions of TorchAir's manual, scoped pattern
registries, ``register_replacement`` and ``verify_replacement``.

Importing this package registers nothing: each default fusion's patterns are traced the
first time a compile needs them (``Fusion.registry()``), once per process, and
``torch._inductor`` is imported only then.

``DEFAULT_FUSIONS`` is the table the compiler, the tests and the benchmarks read.
"""

from __future__ import annotations

from op_sdk.patterns import (
    add_rms_norm_cast,
    add_rms_norm_dynamic_quant,
    add_rms_norm_dynamic_quant_flatten,
    add_rms_norm_quant,
    transpose_batchmatmul,
)
from op_sdk.patterns.fusion import Fusion, Variant, built_fusions
from op_sdk.patterns.registry import (
    DuplicatePatternError,
    PatternRegistry,
    current_registry,
    register_replacement,
    user_registry,
)
from op_sdk.patterns.verify import ReplacementMismatch, verify_replacement

__all__ = ["DEFAULT_FUSIONS", "Fusion", "Variant", "PatternRegistry", "register_replacement",
           "verify_replacement", "ReplacementMismatch", "DuplicatePatternError",
           "current_registry", "user_registry", "register_default_patterns", "built_fusions",
           "get_fusion"]

# In the manual's order; a compile applies them in this order.
DEFAULT_FUSIONS: tuple[Fusion, ...] = (
    add_rms_norm_dynamic_quant.FUSION,
    add_rms_norm_dynamic_quant_flatten.FUSION,
    add_rms_norm_cast.FUSION,
    transpose_batchmatmul.FUSION,
    add_rms_norm_quant.FUSION,
)


def get_fusion(name: str) -> Fusion:
    for f in DEFAULT_FUSIONS:
        if f.name == name:
            return f
    raise KeyError(f"no default fusion {name!r}; fusions: {[f.name for f in DEFAULT_FUSIONS]}")


def register_default_patterns() -> dict[str, PatternRegistry]:
    """Trace and register every default fusion now (normally done lazily, per fusion)."""
    return {f.name: f.registry() for f in DEFAULT_FUSIONS}
