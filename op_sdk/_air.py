"""TorchAir's ``air`` scope operators, for CPU and CUDA.

    scope_enter(str[] keys, str[] values, bool need_execute=False) -> None
    scope_exit(bool need_execute=False) -> None
    record(*, Device? device=None) -> Tensor       an event token
    wait(Tensor[] x) -> ()                         wait for the tokens' records
    wait_tensor(Tensor self, Tensor dependency) -> Tensor

The schemas are TorchAir's (torchair/scope/_scope.py, torchair/ops/_record_wait.py,
torchair/scope/_wait_tensor.py). Called outside a compiled graph they change nothing: the
program runs in order, on the current stream, which is the single-stream result the scopes
must not change. Inside a graph compiled by ``op_sdk.get_npu_backend`` the executor reads
them (op_sdk/compiler/streams.py): the nodes between ``scope_enter(["_user_stream_label"],
[name])`` and ``scope_exit`` run on the stream ``name``.

Every one of them is marked side-effecting (``torch.fx.node.has_side_effect``), so dead-code
elimination keeps them, and so does Inductor (its scheduler keeps side-effecting extern
kernels and their order).

TorchAir defines the same operators when it is imported, each only if it is not defined
yet, except ``wait_tensor``, which it defines unconditionally on first use. So op_sdk
defines each of the first four only if it is not defined yet, and ``wait_tensor`` only when
torch_npu is not installed (TorchAir, which torch_npu carries, owns it otherwise).
"""

from __future__ import annotations

import torch
from torch.fx.node import has_side_effect

__all__ = ["define", "AIR_SCOPE_OPS", "scope_op_names"]

_LIB: list[torch.library.Library] = []

# The operators the stream executor and the well-formedness check read.
AIR_SCOPE_OPS = ("scope_enter", "scope_exit", "record", "wait", "wait_tensor")


def scope_op_names() -> set[str]:
    """The ``str(node.target)`` of each scope operator's default overload."""
    return {f"air.{name}.default" for name in AIR_SCOPE_OPS}


def _has(name: str) -> bool:
    try:
        torch._C._get_schema(f"air::{name}", "")
        return True
    except RuntimeError:
        return False


def _lib() -> torch.library.Library:
    if not _LIB:
        _LIB.append(torch.library.Library("air", "FRAGMENT"))  # noqa: TOR901
    return _LIB[0]


def _scope_enter(keys: list[str], values: list[str], need_execute: bool = False) -> None:
    if len(keys) != len(values):
        raise ValueError(f"air::scope_enter: {len(keys)} keys {list(keys)} but {len(values)} "
                         f"values {list(values)}; they must pair up")


def _scope_exit(need_execute: bool = False) -> None:
    return None


def _record(*, device: torch.device | None = None) -> torch.Tensor:
    return torch.empty(0, device=device)


def _wait(x: list[torch.Tensor]) -> None:
    return None


def _wait_tensor(self: torch.Tensor, dependency: torch.Tensor) -> torch.Tensor:
    # The schema returns a new tensor (no alias annotation): a copy, never ``self``.
    return self.clone()


def _wait_tensor_fake(self: torch.Tensor, dependency: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(self)


_SCHEMAS = {
    "scope_enter": ("scope_enter(str[] keys, str[] values, bool need_execute=False) -> None",
                    _scope_enter, _scope_enter),
    "scope_exit": ("scope_exit(bool need_execute=False) -> None", _scope_exit, _scope_exit),
    "record": ("record(*, Device? device=None) -> Tensor", _record, _record),
    "wait": ("wait(Tensor[] x) -> ()", _wait, _wait),
    "wait_tensor": ("wait_tensor(Tensor self, Tensor dependency) -> Tensor", _wait_tensor,
                    _wait_tensor_fake),
}


def define(torch_npu_installed: bool) -> list[str]:
    """Define the air operators this process lacks; return the names op_sdk defined."""
    defined = []
    for name, (schema, kernel, fake) in _SCHEMAS.items():
        if name == "wait_tensor" and torch_npu_installed:
            continue
        if _has(name):
            continue
        lib = _lib()
        lib.define(schema)
        # one kernel for every backend (CPU, CUDA, and Meta for the ones without tensors)
        lib.impl(name, kernel, "CompositeExplicitAutograd")
        torch.library.register_fake(f"air::{name}", fake, lib=lib)
        defined.append(name)
    for name in AIR_SCOPE_OPS:
        if _has(name) and name != "wait_tensor":
            has_side_effect(getattr(torch.ops.air, name).default)
    return defined
