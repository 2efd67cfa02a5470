"""TorchAir's ``torchair.scope`` forms of the air operators, for model code.

    with op_sdk.scope.npu_stream_switch("stream_1"):
        y = torch.mm(x, w)               # runs on the stream "stream_1"
    z = op_sdk.scope.npu_wait_tensor(z, y)   # z is read only after y is computed

Under ``torch.compile(backend=op_sdk.get_npu_backend(...))`` the context manager leaves
``torch.ops.air.scope_enter`` / ``scope_exit`` nodes in the graph and the executor runs the
nodes between them on that stream (op_sdk/compiler/streams.py, docs/multistream.md). In
eager mode the operators do nothing: the code runs in order on the current stream.
"""

from __future__ import annotations

import torch

__all__ = ["npu_stream_switch", "npu_wait_tensor", "STREAM_LABEL"]

STREAM_LABEL = "_user_stream_label"


class _Scope:
    def __init__(self, attrs: list[tuple[str, str]]):
        self.attrs = attrs

    def __enter__(self):
        keys = [k for k, _ in self.attrs]
        values = [v for _, v in self.attrs]
        return torch.ops.air.scope_enter(keys, values)

    def __exit__(self, *exc):
        torch.ops.air.scope_exit()
        return False


def npu_stream_switch(stream_tag: str, stream_priority: int = 0,
                      enable_inner_parallel: bool = True) -> _Scope:
    """The operators inside the ``with`` block run on the stream named ``stream_tag`` (one
    stream per name, shared by every graph). ``stream_priority`` and
    ``enable_inner_parallel`` are recorded in the scope as TorchAir records them; on CPU and
    CUDA the side stream has the default priority."""
    if not isinstance(stream_tag, str) or not stream_tag:
        raise TypeError(f"npu_stream_switch: stream_tag must be a non-empty str, got {stream_tag!r}")
    if not isinstance(stream_priority, int) or isinstance(stream_priority, bool):
        raise TypeError(f"npu_stream_switch: stream_priority must be an int, got {stream_priority!r}")
    return _Scope([(STREAM_LABEL, stream_tag),
                   ("_user_stream_priority", str(stream_priority)),
                   ("_enable_inner_parallel", str(bool(enable_inner_parallel)))])


def npu_wait_tensor(self: torch.Tensor, dependency: torch.Tensor) -> torch.Tensor:
    """``self``, read only once ``dependency`` is computed (on whatever stream computes it):
    ``torch.ops.air.wait_tensor``. Returns a tensor equal to ``self``."""
    if not hasattr(torch.ops.air, "wait_tensor"):
        _define_wait_tensor()
    return torch.ops.air.wait_tensor(self, dependency)


def _define_wait_tensor() -> None:
    """torch_npu is installed (op_sdk left ``air::wait_tensor`` to TorchAir) and TorchAir has
    not defined it yet: let TorchAir define it, or define op_sdk's where TorchAir cannot be
    imported."""
    import importlib

    try:
        importlib.import_module("torchair.scope._wait_tensor")
    except Exception:  # TorchAir is absent or fails to import: op_sdk's definition
        pass
    if not hasattr(torch.ops.air, "wait_tensor"):
        from op_sdk._air import define

        define(False)
