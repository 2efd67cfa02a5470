"""Graph dumps (``debug.graph_dump``): the FX graph before and after each pass.

Files are named as TorchAir names them, ``{path}/{name}_rank_{rank}_pid_{pid}_ts_{ts}.{type}``,
with ``name`` = ``graph_{compile}_{kind}_{stage index}_{stage}_{before|after}``.
"txt" writes the FX IR listing with shapes, "py" the GraphModule's Python code.
"pbtxt" is the Ascend graph engine's (GE) protobuf text of the *converted* graph; this
backend builds no GE graph, so asking for it is an error, raised when the backend is made.
"""

from __future__ import annotations

import datetime
import os

import torch

__all__ = ["GraphDumper", "check_dump_type"]


def check_dump_type(dump_type: str | None) -> None:
    if dump_type == "pbtxt":
        raise ValueError(
            "CompilerConfig.debug.graph_dump.type='pbtxt' dumps the Ascend graph engine (GE) "
            "graph as protobuf text; op_sdk's CPU / CUDA backend builds no GE graph. Use "
            "'txt' (FX IR listing) or 'py' (Python code) to dump the FX graph before and "
            "after each pass.")


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

    def file_name(self, name: str) -> str:
        ts = datetime.datetime.now().strftime("%Y%m%d%H%M%S%f")
        return os.path.join(self.path,
                            f"{name}_rank_{_rank()}_pid_{os.getpid()}_ts_{ts}.{self.type}")

    def dump(self, gm: torch.fx.GraphModule, name: str) -> str | None:
        if not self.enabled:
            return None
        os.makedirs(self.path, exist_ok=True)
        if self.type == "py":
            gm.recompile()
            text = gm.print_readable(print_output=False, include_stride=True,
                                     include_device=True)
        else:
            text = _listing(gm.graph)
        file = self.file_name(name)
        with open(file, "w") as f:
            f.write(text)
        return file


def _listing(graph: torch.fx.Graph) -> str:
    """The FX IR listing, one node a line, with each value's shape and dtype."""
    lines = []
    for node in graph.nodes:
        v = node.meta.get("val")
        meta = ""
        if isinstance(v, torch.Tensor):
            meta = f"  # {str(v.dtype).replace('torch.', '')}{list(v.shape)}"
        lines.append(f"{node.format_node()}{meta}")
    return "\n".join(lines) + "\n"
