"""Graph dumps (``debug.graph_dump``): the FX graph before and after each pass.

Files are named as TorchAir names them, ``{path}/{name}_rank_{rank}_pid_{pid}_ts_{ts}.{type}``,
with ``name`` = ``graph_{compile}_{kind}_{stage index}_{stage}_{before|after}``; "txt" and
"py" also write TorchAir's pair, ``dynamo_original_graph_{compile}`` (Dynamo's graph as the
backend receives it, before AOTAutograd and its decompositions) and
``dynamo_optimized_graph_{compile}_{kind}`` (the graph the passes leave). A dump that fails
is warned about and the compile goes on.
"txt" writes the FX IR listing with shapes, "py" the GraphModule's Python code, both
before and after each pass; a node inside an air stream scope is marked with its stream. "pbtxt" writes, once per graph after the last pass, the graph
converted to Ascend IR by op_sdk's GE converters (op_sdk.converters) in TorchAir's format
(its ``convert_to_pbtxt``: TensorFlow's GraphDef text, each operator a node whose GE
attributes and descriptors are held as their GE protobuf text; op_sdk.converters.pbtxt.
graphdef): the fused operators as their Ascend IR types with their prototypes' input /
output / attribute names, each operator of a stream scope with its ``_user_stream_label``
attribute as TorchAir writes it; a node with no converter is written as an
``OpSdkUnconverted`` placeholder (attribute ``_fx_target`` names it) and listed in a
comment at the top of the file.
"""  # noqa: E501

from __future__ import annotations

import datetime
import os
import warnings

import torch

__all__ = ["GraphDumper", "check_dump_type"]


def check_dump_type(dump_type: str | None) -> None:
    if dump_type not in (None, "txt", "py", "pbtxt"):
        raise ValueError(f"CompilerConfig.debug.graph_dump.type: expected None, 'txt', 'py' "
                         f"or 'pbtxt', got {dump_type!r}")


def _rank() -> int:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank()
    except Exception:
        pass
    return int(os.environ.get("RANK", 0))


class GraphDumper:
    def __init__(self, dump_type: str | None, path: str | None):
        check_dump_type(dump_type)
        self.type = dump_type
        self.path = path or "."

    @property
    def enabled(self) -> bool:
        return self.type is not None

    @property
    def per_stage(self) -> bool:
        """FX dumps before / after each pass ("txt", "py"); "pbtxt" dumps the converted
        graph once, after the last pass."""
        return self.type in ("txt", "py")

    def file_name(self, name: str) -> str:
        ts = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")
        return os.path.join(self.path,
                            f"{name}_rank_{_rank()}_pid_{os.getpid()}_ts_{ts}.{self.type}")

    def safe_dump(self, gm: torch.fx.GraphModule, name: str) -> str | None:
        """:meth:`dump`, a failure warned about and never raised: a graph dump is a debugging
        aid and does not fail the compile it records (as TorchAir's dumps)."""
        try:
            return self.dump(gm, name)
        except Exception as exc:  # noqa: BLE001  (any failure of the dump, reported)
            warnings.warn(f"op_sdk: the {self.type} graph dump {name} failed ({type(exc).__name__}: "
                          f"{exc}); the compile goes on without it", stacklevel=2)
            return None

    def dump(self, gm: torch.fx.GraphModule, name: str) -> str | None:
        if not self.enabled:
            return None
        os.makedirs(self.path, exist_ok=True)
        if self.type == "pbtxt":
            from op_sdk.converters import convert_fx, pbtxt

            text = pbtxt.graphdef(convert_fx(gm, name, strict=False))
        elif self.type == "py":
            gm.recompile()
            text = _stream_header(gm.graph) + gm.print_readable(
                print_output=False, include_stride=True, include_device=True)
        else:
            text = _listing(gm.graph)
        file = self.file_name(name)
        with open(file, "w") as f:
            f.write(text)
        return file


def _streams(graph: torch.fx.Graph) -> dict:
    """Each node's stream where the graph has air stream scopes (else {})."""
    from op_sdk.compiler import streams

    if not streams.has_streams(graph):
        return {}
    try:
        return streams.stream_of(graph)
    except streams.ScopeError:
        return {}  # malformed scopes: the pipeline's check names the node


def _stream_header(graph: torch.fx.Graph) -> str:
    on = {n.name: s for n, s in _streams(graph).items() if s != "main"}
    if not on:
        return ""
    return "".join(f"# stream {s}: {n}\n" for n, s in on.items())


def _listing(graph: torch.fx.Graph) -> str:
    """The FX IR listing, one node a line, with each value's shape and dtype, and the stream
    of each node inside an air stream scope."""
    stream = _streams(graph)
    lines = []
    for node in graph.nodes:
        v = node.meta.get("val")
        meta = ""
        if isinstance(v, torch.Tensor):
            meta = f"  # {str(v.dtype).replace('torch.', '')}{list(v.shape)}"
        if stream.get(node, "main") != "main":
            meta += f"  # stream: {stream[node]}"
        lines.append(f"{node.format_node()}{meta}")
    return "\n".join(lines) + "\n"
