"""The converter table: which function converts the FX nodes of which operator.

Filled by ``@register_fx_node_ge_converter(op)`` (each slice's converter module, the
declared ``ge=GeIr(...)`` converters of op_sdk.converters.spec, a user's own) and read by
op_sdk.converters' graph conversion; it imports nothing of op_sdk but the slice discovery.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch

from op_sdk._slices import import_slices

__all__ = ["register_fx_node_ge_converter", "torchair_converts", "load_slices"]

# the package's modules that are machinery, not a slice's converters
MACHINERY = ("ir", "graph", "pbtxt", "registry", "torchair_bridge", "spec")


def load_slices() -> None:
    """Import every converter module of the package (each slice's, and the aten / air
    ones) once: they register their converters and declare their IR prototypes."""
    import_slices(__package__, MACHINERY)


_CONVERTERS: dict[Any, Callable] = {}
# Python's operators, as FX graphs call them on symbolic sizes (converted as TorchAir does)
SYMBOLIC_ARITHMETIC = (operator.add, operator.sub, operator.mul)
# the operators whose converter writes what TorchAir's own converter of them writes (TorchAir
# keeps using its own; tests/npu/real/test_converters.py compares the two)
_TORCHAIR_HAS_OWN: set[str] = set()


def register_fx_node_ge_converter(op, *, torchair_has_own: bool = False) -> Callable[[Callable], Callable]:
    """Decorator: ``fn`` converts FX nodes calling ``op`` (an OpOverload). With
    ``torchair_has_own=True`` the converter declares that TorchAir converts ``op`` itself and
    that this one writes the same GE operator (checked against TorchAir's)."""
    if not isinstance(op, torch._ops.OpOverload) and op not in SYMBOLIC_ARITHMETIC:
        raise TypeError(f"register_fx_node_ge_converter: expected an OpOverload such as "
                        f"torch.ops.npu.x.default (or operator.add / sub / mul, the "
                        f"arithmetic on symbolic sizes), got {op!r}")

    def register(fn: Callable) -> Callable:
        fn.ge_converter_for = op
        if _is_own(fn) and op in _CONVERTERS and not _is_own(_CONVERTERS[op]):
            # op_sdk loads its converters at the first conversion, after a script may have
            # registered its own: the script's stays (as in TorchAir, whose converters are
            # registered by `import torchair`, so a user's always comes later and wins)
            return fn
        _CONVERTERS[op] = fn
        if torchair_has_own:
            _TORCHAIR_HAS_OWN.add(op.name())
        return fn

    return register


def _is_own(fn: Callable) -> bool:
    """Whether ``fn`` is one of op_sdk's converters (a slice of op_sdk's, or a declared one)."""
    return getattr(fn, "__module__", "").startswith("op_sdk.")


def torchair_converts() -> frozenset[str]:
    """The qualified names (``npu::npu_rms_norm``) of the operators whose registered converter
    declares ``torchair_has_own``."""
    return frozenset(_TORCHAIR_HAS_OWN)
