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

import dataclasses
import json
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
        self.names = [_source_name(n) for n in gm.graph.nodes if n.op == "placeholder"]
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


# GE's serialized graph is a protobuf message, at most 2 GiB; as TorchAir, 200 MiB are kept
# free, and a graph whose weights would take it past the rest holds them in files
MAX_GRAPH_BYTES = (2048 - 200) * 1024 * 1024


def _rank_directory(export_path: str) -> str:
    """As TorchAir: in a process group, each rank exports into ``{export_path}/rank_{rank}``."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return os.path.join(export_path, f"rank_{dist.get_rank()}")
    return export_path


def _externalize_weights(graph, weight_names: set[str], directory: str) -> bool:
    """TorchAir's weight externalisation: when the graph with its weights' bytes would be
    larger than MAX_GRAPH_BYTES, each weight Const becomes a FileConstant (its shape, dtype
    and ``file_path`` ``{directory}/{name, dots as underscores}``) and its bytes are
    written to that file, in row-major order. Returns whether it did."""
    from op_sdk.converters import ir, pbtxt

    consts = [op for op in graph.ops if op.type == "Const" and op.name in weight_names]
    if not consts:
        return False
    values = {op.name: op.attrs["value"] for op in consts}
    weight_bytes = sum(len(v[1][1] or b"") for v in values.values())
    for op in consts:  # the graph's own size: without the weights' bytes
        op.attrs["value"] = ("Tensor", (values[op.name][1][0], None))
    graph_bytes = len(pbtxt.graphdef(graph).encode())
    externalize = weight_bytes + graph_bytes > MAX_GRAPH_BYTES
    log.info("export: graph %d bytes, weights %d bytes (%d weights), limit %d: weights "
             "externalized: %s", graph_bytes, weight_bytes, len(consts), MAX_GRAPH_BYTES,
             externalize)
    for op in consts:
        desc, data = values[op.name][1]
        if not externalize:
            op.attrs["value"] = values[op.name]
            continue
        path = os.path.join(directory, op.name.replace(".", "_"))
        with open(path, "wb") as f:
            f.write(data or b"")
        op.type = "FileConstant"
        op.attrs = {"file_path": ("String", path),
                    "shape": ("ListInt", list(desc.shape or ())),
                    "dtype": ("Type", ir.GE_DTYPE[desc.dtype])}
        op.output_desc = [dataclasses.replace(desc, name="y")]
    return externalize


def _write_atc_config(export_path: str, export_name: str, groups: dict) -> None:
    """TorchAir's ATC configuration of a multi-rank export, written by rank 0 when the graph
    has collectives: ``model_relation_config.json`` (each rank's model ``{name}{rank}.air``
    deployed on device ``0:0:{rank}``, its instance id, the communication groups with their
    ranks) and ``numa_config.json`` (one node holding every rank's device)."""
    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized()) or not groups or dist.get_rank() != 0:
        return
    ranks = dist.get_process_group_ranks(dist.distributed_c10d._get_default_group())
    relation = {
        "deploy_config": [{"submodel_name": f"{export_name}{r}.air",
                           "deploy_device_id_list": f"0:0:{r}"} for r in ranks],
        "model_name_to_instance_id": [{"submodel_name": f"{export_name}{r}.air",
                                       "model_instance_id": r} for r in ranks],
        "comm_group": [{"group_name": name, "group_rank_list": str(list(group_ranks))}
                       for name, (group_ranks, _) in groups.items()],
        "rank_table": [{"rank_id": r, "model_instance_id": r} for r in ranks],
    }
    numa = {"cluster": [{"cluster_nodes": [{"node_id": 0, "node_type": "ATLAS800",
                                            "ipaddr": "127.0.0.1", "port": 29500,
                                            "item_list": [{"item_id": r} for r in ranks]}],
                         "nodes_toplogy": {}}],
            "item_def": [{"item_type": "Ascend910"}],
            "node_def": [{"item": [{"item_type": "Ascend910"}]}]}
    log.info("dynamo_export: ATC configuration for %d ranks written to %s", len(ranks), export_path)
    for name, content in (("model_relation_config.json", relation), ("numa_config.json", numa)):
        with open(os.path.join(export_path, name), "w") as f:
            json.dump(content, f, indent=4, ensure_ascii=False)


def _source_name(node: torch.fx.Node) -> str | None:
    """The name TorchAir gives the Data of a graph input: the model's argument (a local)
    or global variable it comes from."""
    from torch._dynamo.source import GlobalSource, LocalSource

    source = getattr(node.meta.get("grapharg"), "source", None)
    if isinstance(source, LocalSource):
        return source.local_name
    if isinstance(source, GlobalSource):
        return source.global_name
    return None


def _ref_data_name(t: torch.Tensor) -> str:
    """TorchAir's name of the RefData of an input the model writes: its shape, stride,
    storage offset and the Python id of the tensor passed."""
    return "_".join(["RefData", *map(str, t.shape), *map(str, t.stride()),
                     str(t.storage_offset()), str(id(t))])


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
                       module_stack=bool(config.export.experimental.enable_record_nn_module_stack.value),
                       ref_data=lambda position: _ref_data_name(exporter.inputs[position - lifted]),
                       input_names={lifted + i: n for i, n in enumerate(exporter.names) if n})
    directory = _rank_directory(export_path)
    os.makedirs(directory, exist_ok=True)
    _externalize_weights(graph, {n for n, _ in constants.values()}, directory)
    if config.export.experimental.auto_atc_config_generated.value:
        _write_atc_config(export_path, export_name, graph.process_groups)
    dump = os.path.join(directory, "dynamo.pbtxt")
    with open(dump, "w") as f:
        f.write(pbtxt.graphdef(graph))  # TorchAir's format: TensorFlow's GraphDef text
    warnings.warn(f"op_sdk.dynamo_export: wrote {dump} (the "
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
