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
        _CONVERTERS[op] = fn
        fn.ge_converter_for = op
        if torchair_has_own:
            _TORCHAIR_HAS_OWN.add(op.name())
        return fn

    return register


def torchair_converts() -> frozenset[str]:
    """The qualified names (``npu::npu_rms_norm``) of the operators whose registered converter
    declares ``torchair_has_own``."""
    return frozenset(_TORCHAIR_HAS_OWN)
