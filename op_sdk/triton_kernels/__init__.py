"""op_sdk's Triton kernels: the CUDA kernels of the operators on a model's hot path.

Each operator names its kernel in its declaration (``kernels={"cuda": TritonKernel(...)}``);
the module holding it is imported on the first call, so ``import op_sdk`` imports no Triton
and compiles nothing. A kernel module's launchers take the operator's arguments, check them
with the operator's own rules, allocate the outputs as the operator's fake does, and run the
reference for the forms their kernel does not cover (each launcher's docstring lists them).

The launchers also run on CPU tensors under Triton's interpreter (``TRITON_INTERPRET=1``,
set before the first kernel module is imported): the tests' way to check them without a
GPU (docs/triton.md).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable

log = logging.getLogger("op_sdk")

__all__ = ["TritonKernel", "available"]


def available() -> bool:
    """Whether Triton can be imported here."""
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


class TritonKernel:
    """An operator's kernel written in Triton: ``module.function``, imported on first call.

    Where Triton cannot be imported the call runs ``fallback`` (the operator's reference),
    with one warning.
    """

    kind = "triton"

    def __init__(self, module: str, function: str, fallback: Callable | None = None):
        self.module = module
        self.function = function
        self.fallback = fallback
        self._fn: Callable | None = None
        self.__name__ = f"triton_{function}"

    def load(self) -> Callable:
        if self._fn is None:
            if available():
                self._fn = getattr(importlib.import_module(self.module), self.function)
            elif self.fallback is not None:
                log.warning("op_sdk: Triton is not installed; %s runs its reference on CUDA",
                            self.function)
                self._fn = self.fallback
            else:
                raise ImportError(f"op_sdk: {self.module}.{self.function} needs Triton")
        return self._fn

    def __call__(self, *args, **kwargs):
        return (self._fn or self.load())(*args, **kwargs)

    def __repr__(self) -> str:
        return f"TritonKernel({self.module}.{self.function})"
