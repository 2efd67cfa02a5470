"""How a package collects its slices: every module named after an operator slice
(``op_sdk/ops/<slice>.py``, ``op_sdk/converters/<slice>.py``, ``op_sdk/onnx/<slice>.py``) is
imported by name, so a new slice is a new module and nothing lists it."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

__all__ = ["import_slices"]


def import_slices(package: str, path: Iterable[str], skip: Iterable[str] = ()) -> list:
    """Import, in name order, every module of ``package`` (whose ``__path__`` is ``path``)
    that is not private (``_name``) and not in ``skip`` (the package's machinery); returns
    the modules."""
    skip = set(skip)
    names = sorted(m.name for m in pkgutil.iter_modules(list(path))
                   if not m.name.startswith("_") and m.name not in skip)
    return [importlib.import_module(f"{package}.{name}") for name in names]
