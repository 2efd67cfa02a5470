"""Loads the compiled extension ``op_sdk._C``; its static initialisers register the
C++ kernels (TORCH_LIBRARY_IMPL) with the dispatcher. No Python bindings are involved."""

from __future__ import annotations

import importlib

_STATE: dict[str, object] = {}


def load() -> bool:
    """Load the extension once; return whether its kernels are registered."""
    if "loaded" not in _STATE:
        import torch  # noqa: F401  (loads libc10 / libtorch, which the extension links to)

        try:
            importlib.import_module("op_sdk._C")
            _STATE["loaded"] = True
        except ImportError as exc:
            _STATE["loaded"] = False
            _STATE["error"] = str(exc)
    return bool(_STATE["loaded"])


def load_error() -> str | None:
    """Why the extension did not load, or None."""
    return _STATE.get("error")  # type: ignore[return-value]
