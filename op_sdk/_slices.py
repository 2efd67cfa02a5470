"""How a package collects its slices: every module named after an operator slice
(``op_sdk/ops/<slice>.py``, ``op_sdk/converters/<slice>.py``, ``op_sdk/onnx/<slice>.py``) is
imported by name, so a new slice is a new module and nothing lists it."""

from __future__ import annotations

import importlib
import pkgutil
import sys
from collections.abc import Iterable

__all__ = ["import_slices"]

# the packages whose slices are imported (or being imported: a slice may look the table up
# while the others load)
_IMPORTED: set[str] = set()


def import_slices(package: str, skip: Iterable[str] = ()) -> None:
    """Import, once and in name order, every module of ``package`` (already imported, or
    being imported) that is not private (``_name``) and not in ``skip`` (the package's
    machinery)."""
    if package in _IMPORTED:
        return
    _IMPORTED.add(package)
    skip = set(skip)
    for name in sorted(m.name for m in pkgutil.iter_modules(sys.modules[package].__path__)
                       if not m.name.startswith("_") and m.name not in skip):
        importlib.import_module(f"{package}.{name}")
