"""The converter table: which function converts the FX nodes of which operator.

Filled by ``@register_fx_node_ge_converter(op)`` (each slice's converter module, the
declared ``ge=GeIr(...)`` converters of op_sdk.converters.spec, a user's own) and read by
op_sdk.converters' graph conversion; it imports nothing of op_sdk.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["register_fx_node_ge_converter"]

_CONVERTERS: dict[Any, Callable] = {}


def register_fx_node_ge_converter(op) -> Callable[[Callable], Callable]:
    """Decorator: ``fn`` converts FX nodes calling ``op`` (an OpOverload)."""
    if not isinstance(op, torch._ops.OpOverload):
        raise TypeError(f"register_fx_node_ge_converter: expected an OpOverload such as "
                        f"torch.ops.npu.x.default, got {op!r}")

    def register(fn: Callable) -> Callable:
        _CONVERTERS[op] = fn
        fn.ge_converter_for = op
        return fn

    return register
