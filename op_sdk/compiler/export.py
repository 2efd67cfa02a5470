"""TorchAir's ``dynamo_export`` and ``patch_for_hcom``, off the NPU.

``dynamo_export(*args, model=m, export_path="export_file", export_name="export",
dynamic=False, config=None, **kwargs)`` traces ``m`` on the sample inputs as one graph
(``fullgraph=True``), runs op_sdk's pass pipeline on it (the fusions the config enables) and
writes the result, converted by the GE converters, as ``{export_path}/dynamo.pbtxt`` in
TorchAir's format (TensorFlow's GraphDef text holding each operator's GE attributes and
descriptors as text; ``op_sdk.converters.pbtxt.graphdef``), what TorchAir writes beside its
``.air``. As TorchAir's, the export stops at the graph's first call: no operator runs. The
model's parameters and buffers are Const nodes named after them, holding their values; the
sample inputs are the Data nodes. ``{export_name}.air`` (GE's serialized model, ATC's
input) is written by CANN's graph engine, which op_sdk does not have: it is not written,
and a warning says so. As TorchAir, a symbolic link for the directory or the ``.air`` path
is refused with an error logged and nothing written, the directory is made if missing, and
nothing is returned.
"""

from __future__ import annotations

import logging
import os
import warnings

import torch

from op_sdk.compiler.backend import NpuBackend
from op_sdk.compiler.config import CompilerConfig

__all__ = ["dynamo_export", "patch_for_hcom"]

log = logging.getLogger("op_sdk")


def _is_symlink(path: str) -> bool:
    full = os.path.abspath(path)
    if os.path.islink(full):
        log.error("Target file path %s should not be an symbolic link.", full)
        return True
    return False


class _Exporter(NpuBackend):
    """The backend with the graph kept: AOTAutograd and the pass pipeline, whatever the
    mode (the exported graph is the one the passes leave); the graph's first call ends the
    model's call, as TorchAir's export does, so no operator runs (a dtype with no CPU
    kernel exports too)."""

    def __init__(self, config: CompilerConfig):
        super().__init__(config)
        self.graphs: list[tuple[torch.fx.GraphModule, int]] = []  # (graph, lifted weights)
        self.inputs: list = []

    def __call__(self, gm, example_inputs):
        report, pipeline = self._begin()
        self.inputs = list(example_inputs)
        self._lifted = sum(1 for _ in gm.parameters()) + sum(1 for _ in gm.buffers())
        return self._aot(gm, example_inputs, pipeline, report)

    def _compile_graph(self, pipeline, report, num_dynamo_inputs, kind, gm, example_inputs):
        super()._compile_graph(pipeline, report, num_dynamo_inputs, kind, gm, example_inputs)
        self.graphs.append((gm, self._lifted))

        def exported(*args):  # TorchAir's export stops at the graph's first call: nothing runs
            raise _Exported()

        return exported


class _Exported(Exception):
    """The graph is kept: the model's call ends here (TorchAir's ExportSuccess)."""


def dynamo_export(*args, model: torch.nn.Module, export_path: str = "export_file",
                  export_name: str = "export", dynamic: bool = False,
                  config: CompilerConfig | None = None, **kwargs) -> None:
    """TorchAir's ``dynamo_export`` (see the module's documentation): writes
    ``{export_path}/dynamo.pbtxt``."""
    from op_sdk.converters import convert_fx, pbtxt

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"op_sdk.dynamo_export: model must be a torch.nn.Module, got "
                        f"{type(model).__name__}")
    export_name = os.path.split(export_name)[-1]
    if _is_symlink(export_path):
        return
    air = os.path.join(export_path, export_name) + ".air"
    if _is_symlink(air):
        return
    config = CompilerConfig() if config is None else config
    log.info("dynamo_export: export_path: %s, export_name: %s, dynamic: %s", export_path,
             export_name, dynamic)
    weights = {id(t): n for n, t in model.named_buffers()}
    weights.update({id(t): n for n, t in model.named_parameters()})
    exporter = _Exporter(config)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=exporter, fullgraph=True, dynamic=dynamic)
    try:
        with torch.no_grad():
            compiled(*args, **kwargs)
    except _Exported:
        log.info("dynamo_export: export graph over")
    finally:
        torch._dynamo.reset()
    if not exporter.graphs:
        raise RuntimeError("op_sdk.dynamo_export: the model produced no graph to export")
    gm, lifted = exporter.graphs[-1]
    constants = {}
    for i, t in enumerate(exporter.inputs):  # Dynamo's inputs follow the lifted weights
        if isinstance(t, torch.Tensor) and id(t) in weights:
            constants[lifted + i] = (weights[id(t)], t)
    graph = convert_fx(gm, export_name, strict=False, constants=constants,
                       module_stack=bool(config.export.experimental.enable_record_nn_module_stack.value))
    os.makedirs(export_path, exist_ok=True)
    with open(os.path.join(export_path, "dynamo.pbtxt"), "w") as f:
        f.write(pbtxt.graphdef(graph))  # TorchAir's format: TensorFlow's GraphDef text
    warnings.warn(f"op_sdk.dynamo_export: wrote {os.path.join(export_path, 'dynamo.pbtxt')} (the "
                  f"GE graph in TorchAir's pbtxt format); {air} is not written: GE's serialized model is "
                  f"made by CANN's graph engine, which this machine does not have",
                  stacklevel=2)


def patch_for_hcom() -> None:
    """TorchAir's ``patch_for_hcom``: with torch >= 2.3.1 TorchAir itself says it is not
    needed (Dynamo traces torch.distributed's collectives as functional collectives), and
    off the NPU there are no HCCL collectives to patch in: it warns so, and installs the
    traceable-collective remaps TorchAir installs on import (op_sdk.compiler.collectives)."""
    from op_sdk.compiler import collectives

    collectives.install()
    log.warning("For versions 2.3.1 and above of PyTorch, there is no need to call "
                "patch_for_hcom anymore (op_sdk: torch.distributed's collectives are traced "
                "as functional collectives, send / recv / broadcast / all_to_all as TorchAir "
                "maps them; nothing else is patched).")
