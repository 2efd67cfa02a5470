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

__all__ = ["npu_stream_switch", "npu_wait_tensor", "super_kernel", "limit_core_num",
           "op_never_timeout", "data_dump", "STREAM_LABEL", "capped_threads", "merged",
           "regions"]

STREAM_LABEL = "_user_stream_label"


def merged(stack: list[dict[str, str]]) -> dict[str, str]:
    """The scope attributes an operator inside the scopes ``stack`` (outermost first)
    carries, as TorchAir sets them: inner scopes override outer ones; a ``super_kernel``
    scope of None or "" removes an enclosing super kernel's two attributes, and sets none
    of its own scope's."""
    out: dict[str, str] = {}
    for attrs in stack:
        for key, value in attrs.items():
            if key == "_super_kernel_scope" and value == "":
                out.pop("_super_kernel_scope", None)
                out.pop("_super_kernel_options", None)
                break
            out[key] = value
    return out


def regions(attrs: dict[str, str]) -> list[str]:
    """The TorchAir scopes (other than stream switches) that ``merged`` attributes put an
    operator in, as the compile report names them."""
    out = []
    if "_super_kernel_scope" in attrs:
        options = attrs.get("_super_kernel_options", "")
        out.append(f"super_kernel {attrs['_super_kernel_scope']!r}"
                   + (f" options {options!r}" if options else ""))
    if "_op_aicore_num" in attrs:
        out.append(f"limit_core_num({attrs['_op_aicore_num']}, "
                   f"{attrs.get('_op_vectorcore_num', '0')})")
    if attrs.get("_op_exec_never_timeout") == "True":
        out.append("op_never_timeout")
    if attrs.get("torchair_enable_data_dump") == "True":
        out.append("data_dump")
    return out


class capped_threads:
    """Runs the ``with`` block with at most ``cap`` intra-op threads on this thread (None:
    unchanged), then gives the count back (limit_core_num's meaning on CPU)."""

    def __init__(self, cap: int | None):
        self.cap = cap
        self.before: list[int | None] = []

    def __enter__(self):
        before = torch.get_num_threads() if self.cap is not None else None
        if before is not None and self.cap < before:
            torch.set_num_threads(self.cap)
        else:
            before = None
        self.before.append(before)
        return self

    def __exit__(self, *exc):
        before = self.before.pop()
        if before is not None:
            torch.set_num_threads(before)
        return False


class _Scope:
    def __init__(self, attrs: list[tuple[str, str]], threads: int | None = None):
        self.attrs = attrs
        self.threads = capped_threads(threads) if threads is not None else None

    def __enter__(self):
        keys = [k for k, _ in self.attrs]
        values = [v for _, v in self.attrs]
        if self.threads is not None and not torch.compiler.is_compiling():
            self.threads.__enter__()   # eager: the block's operators run capped
        return torch.ops.air.scope_enter(keys, values)

    def __exit__(self, *exc):
        torch.ops.air.scope_exit()
        if self.threads is not None and not torch.compiler.is_compiling():
            self.threads.__exit__(*exc)
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


def super_kernel(scope: str | None, options: str = "") -> _Scope:
    """TorchAir's ``torchair.scope.super_kernel``: the operators inside form the super kernel
    ``scope`` (compiled by GE into one kernel on the NPU, with ``options``). Recorded as
    TorchAir records it: the scope's ``_super_kernel_scope`` / ``_super_kernel_options``
    attributes on every operator of the GE graph (op_sdk's GE converter and pbtxt dump); a
    ``scope`` of None or "" takes the operators inside out of an enclosing super kernel. On
    CPU and CUDA the operators run as they would outside it."""
    if scope is not None and not isinstance(scope, str):
        raise TypeError(f"super_kernel: scope must be a str or None, got {scope!r}")
    if not isinstance(options, str):
        raise TypeError(f"super_kernel: options must be a str, got {options!r}")
    return _Scope([("_super_kernel_scope", scope or ""), ("_super_kernel_options", options)])


def limit_core_num(op_aicore_num: int, op_vectorcore_num: int) -> _Scope:
    """TorchAir's (and npugraph_ex's) ``scope.limit_core_num``: the operators inside use at
    most ``op_aicore_num`` AI Cores and ``op_vectorcore_num`` Vector Cores on the NPU
    (``[1, max]`` and ``[0, max]``: 0 where the chip has no Vector Core). Recorded as TorchAir
    records it (``_op_aicore_num`` / ``_op_vectorcore_num`` on the GE graph's operators). On
    CPU the operators inside run with at most ``op_aicore_num`` intra-op threads: eagerly,
    and in graphs compiled by op_sdk's backend (the stream executor caps each node of the
    region; max-autotune compiles the region as a partition of its own whose kernels are
    generated for that many threads); on CUDA it changes nothing."""
    for name, value, low in (("op_aicore_num", op_aicore_num, 1),
                             ("op_vectorcore_num", op_vectorcore_num, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"limit_core_num: {name} must be an int >= {low}, got {value!r}")
    return _Scope([("_op_aicore_num", str(op_aicore_num)),
                   ("_op_vectorcore_num", str(op_vectorcore_num))], threads=op_aicore_num)


def op_never_timeout(enable: bool = True) -> _Scope:
    """TorchAir's ``scope.op_never_timeout``: the operators inside never time out on the NPU
    (the bool attribute ``_op_exec_never_timeout`` on the GE graph's operators, as TorchAir
    writes it); CPU operators have no execution timeout."""
    if not isinstance(enable, bool):
        raise TypeError(f"op_never_timeout() argument 'enable' must be bool, but got "
                        f"{type(enable).__name__}.")
    return _Scope([("_op_exec_never_timeout", str(enable))])


def data_dump() -> _Scope:
    """TorchAir's ``scope.data_dump``: the operators inside are the ones whose tensors GE's
    data dump writes (``torchair_enable_data_dump`` on the GE graph's operators, as TorchAir
    writes it). Recorded in the graph; op_sdk's own tensor dump is
    ``debug.data_dump`` / npugraph_ex's ``dump_tensor_data`` (docs/usage.md)."""
    return _Scope([("torchair_enable_data_dump", "True")])


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
