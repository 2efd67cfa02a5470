"""TorchAir's ``npugraph_ex`` package as op_sdk has it (``import op_sdk.npugraph_ex as
npugraph_ex``): its ``CompilerConfig`` (option names, defaults, validation), ``compile_fx``,
``get_npu_backend``, ``get_compiler``, ``register_replacement``, ``logger`` and its ``scope`` /
``ops`` modules, the names of ``torch.compile(m, backend="npugraph_ex", options={...})``
(op_sdk.compiler.npugraph_ex) for code that calls them directly."""

from __future__ import annotations

import logging

from op_sdk import ops, scope  # noqa: F401  (npugraph_ex.ops / npugraph_ex.scope)
from op_sdk.compiler.npugraph_ex import CompilerConfig, compile_fx
from op_sdk.compiler.npugraph_ex import get_compiler_ex as get_compiler
from op_sdk.compiler.npugraph_ex import get_npu_backend_ex as get_npu_backend
from op_sdk.patterns.registry import register_replacement

__all__ = ["get_npu_backend", "get_compiler", "compile_fx", "CompilerConfig", "logger",
           "register_replacement"]

logger = logging.getLogger("op_sdk")
