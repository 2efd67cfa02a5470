"""TorchAir's ``npugraph_ex`` package as op_sdk has it (``import op_sdk.npugraph_ex as
npugraph_ex``): its ``CompilerConfig`` (option names, defaults, validation), ``compile_fx``,
``get_npu_backend``, ``get_compiler``, ``register_replacement``, ``logger`` and its ``scope`` /
``ops`` modules, the names of ``torch.compile(m, backend="npugraph_ex", options={...})``
(op_sdk.compiler.npugraph_ex) for code that calls them directly."""

from __future__ import annotations

import logging

from op_sdk import ops, scope  # noqa: F401  (npugraph_ex.ops / npugraph_ex.scope)
from op_sdk.compiler.backend import NpuBackend, NpuFxCompiler
from op_sdk.compiler.backend import get_npu_backend as _get_npu_backend
from op_sdk.compiler.npugraph_ex import CompilerConfig, compile_fx
from op_sdk.patterns.registry import register_replacement

__all__ = ["get_npu_backend", "get_compiler", "compile_fx", "CompilerConfig", "logger",
           "register_replacement"]

logger = logging.getLogger("op_sdk")


def get_npu_backend(*, compiler_config: CompilerConfig | None = None,
                    custom_decompositions: dict | None = None) -> NpuBackend:
    """npugraph_ex's ``get_npu_backend(*, compiler_config=None, custom_decompositions={})``."""
    config = compiler_config if compiler_config is not None else CompilerConfig()
    if not isinstance(config, CompilerConfig):
        raise TypeError(f"npugraph_ex.get_npu_backend: compiler_config must be an "
                        f"npugraph_ex CompilerConfig, got {type(config).__name__}")
    return _get_npu_backend(config.to_op_sdk(), custom_decompositions)


def get_compiler(compiler_config: CompilerConfig | None = None) -> NpuFxCompiler:
    """npugraph_ex's ``get_compiler``: the graph compiler of its backend, for a backend of the
    user's own (op_sdk.compiler.backend.NpuFxCompiler)."""
    config = compiler_config if compiler_config is not None else CompilerConfig()
    return NpuFxCompiler(config.to_op_sdk())
