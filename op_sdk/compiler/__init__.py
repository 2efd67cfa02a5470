"""The torch.compile backend: config -> AOTAutograd -> ordered pass pipeline -> executor.

Modules, in the order a compile uses them: ``config`` (CompilerConfig), ``backend``
(get_npu_backend), ``pipeline`` (the stages and their order), ``noop_removal``,
``executors`` (Inductor, eager, CUDA graphs), ``dump`` (graph dumps), ``report`` (what
each compile did). The fusion patterns live in ``op_sdk.patterns``.

Importing this package is cheap; ``get_npu_backend`` and the pipeline import
``torch._inductor`` when first used.
"""

from __future__ import annotations

from op_sdk.compiler.config import CompilerConfig
from op_sdk.compiler.report import CompileReport, GraphReport, NearMiss, recent_reports

__all__ = ["CompilerConfig", "get_npu_backend", "NpuBackend", "CompileReport", "GraphReport",
           "NearMiss", "recent_reports"]


def __getattr__(name):
    if name in ("get_npu_backend", "NpuBackend"):
        from op_sdk.compiler import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'op_sdk.compiler' has no attribute {name!r}")
