"""Whether torch_npu is here, and what its registry holds: the two facts op_sdk.library
and the binding loader (op_sdk.npu.build) both read. Imports nothing of op_sdk."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from typing import Any

import torch

__all__ = ["torch_npu_module", "has_schema"]

_TORCH_NPU: list[Any] = []


def torch_npu_module():
    """Return the imported torch_npu module, or None when it cannot be imported.

    torch_npu owns the ``npu`` namespace when present, so it must be imported before
    the SDK defines anything; any failure to import it (no CANN libraries) means absent.
    """
    if not _TORCH_NPU:
        module = None
        if "torch_npu" in sys.modules or importlib.util.find_spec("torch_npu") is not None:
            try:
                module = importlib.import_module("torch_npu")
            except Exception as exc:  # a broken install behaves as "absent"
                warnings.warn(f"op_sdk: torch_npu is installed but failed to import ({exc}); "
                              "using op_sdk's own definitions", stacklevel=2)
        _TORCH_NPU.append(module)
    return _TORCH_NPU[0]


def schema_of(qualname: str):
    """The dispatcher's schema of ``namespace::name`` or ``namespace::name.overload``
    (RuntimeError where there is none)."""
    name, _, overload = qualname.partition(".")
    return torch._C._get_schema(name, overload)


def has_schema(qualname: str) -> bool:
    """Whether the dispatcher has a schema for ``namespace::name`` (or
    ``namespace::name.overload``)."""
    try:
        schema_of(qualname)
        return True
    except RuntimeError:
        return False
