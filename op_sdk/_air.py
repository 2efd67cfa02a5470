"""TorchAir's ``air`` scope operators, for CPU and CUDA.

    scope_enter(str[] keys, str[] values, bool need_execute=False) -> None
    scope_exit(bool need_execute=False) -> None
    record(*, Device? device=None) -> Tensor       an event token
    wait(Tensor[] x) -> ()                         wait for the tokens' records
    wait_tensor(Tensor self, Tensor dependency) -> Tensor
    print(Tensor[] tensors, str msg_format, str placeholder, int summarize_size,
          bool tensor_detail) -> None               torchair.ops.npu_print's
    tagged_event_record(str tag, bool created_inside=False) -> ()
    tagged_event_wait(str tag, bool created_inside=False) -> ()
    record_tagged_stream(Tensor input, str tag) -> ()
    record_tagged_stream_(Tensor(a!) input, str tag) -> ()    torchair.ops' tagged events

The schemas are TorchAir's (torchair/scope/_scope.py, torchair/ops/_record_wait.py,
torchair/scope/_wait_tensor.py, torchair/ops/_tagged_event.py). Called outside a compiled
graph they change nothing: the program runs in order, on the current stream, which is the
single-stream result the scopes must not change. Inside a graph compiled by
``op_sdk.get_npu_backend`` the executor reads them (op_sdk/compiler/streams.py): the nodes
between ``scope_enter(["_user_stream_label"], [name])`` and ``scope_exit`` run on the stream
``name``.

A tagged event (``create_tagged_event(tag)``, torchair.ops.npu_create_tagged_event) names an
ordering point by a string: inside a compiled graph, a ``tagged_event_wait(tag)`` runs after
the last ``tagged_event_record(tag)`` issued before it in the graph (the executor makes it a
cross-stream dependency). Outside a graph, and across graphs, there is nothing to wait for:
eager work runs in order on the caller's stream, and a compiled graph's streams all join the
caller's stream before its call returns, so every record issued earlier has completed.
``record_tagged_stream`` (keep a tensor's memory for a stream that uses it) is what the
executors do for every tensor used on another stream than its producer's, so it changes
nothing either. The tags are process-wide, as TorchAir's are.

Every one of them is marked side-effecting (``torch.fx.node.has_side_effect``), so dead-code
elimination keeps them, and so does Inductor (its scheduler keeps side-effecting extern
kernels and their order).

TorchAir defines the same operators when it is imported, each only if it is not defined
yet, except ``wait_tensor``, which it defines unconditionally on first use. So op_sdk
defines each of the first four only if it is not defined yet, and ``wait_tensor`` only when
torch_npu is not installed (TorchAir, which torch_npu carries, owns it otherwise).
"""

from __future__ import annotations

import threading

import torch
from torch.fx.node import has_side_effect

__all__ = ["define", "AIR_SCOPE_OPS", "AIR_EVENT_OPS", "scope_op_names", "TaggedEvent",
           "create_tagged_event", "tag_of"]

_LIB: list[torch.library.Library] = []

# The operators the stream executor and the well-formedness check read.
AIR_SCOPE_OPS = ("scope_enter", "scope_exit", "record", "wait", "wait_tensor")
# ... and the tagged-event ones (torchair.ops.npu_tagged_event_record / wait /
# npu_record_tagged_stream)
AIR_EVENT_OPS = ("tagged_event_record", "tagged_event_wait", "record_tagged_stream",
                 "record_tagged_stream_")


def scope_op_names() -> set[str]:
    """The ``str(node.target)`` of each scope operator's default overload."""
    return {f"air.{name}.default" for name in AIR_SCOPE_OPS + AIR_EVENT_OPS}


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


# -- tagged events ---------------------------------------------------------------------------


class TaggedEvent:
    """The event ``torchair.ops.npu_create_tagged_event(tag)`` returns: a named ordering
    point that graphs record and wait for (module docstring)."""

    def __init__(self, tag: str):
        self.tag = tag

    def __repr__(self) -> str:
        return f"TaggedEvent(tag={self.tag!r})"


_TAGGED: dict[str, TaggedEvent] = {}
_TAGGED_LOCK = threading.Lock()


def create_tagged_event(tag: str) -> TaggedEvent:
    if not isinstance(tag, str):
        raise TypeError(f"npu_create_tagged_event: tag must be a str, got {type(tag).__name__}")
    with _TAGGED_LOCK:
        if tag in _TAGGED:
            raise ValueError(f"tagged event tag {tag} is already in use")
        event = _TAGGED[tag] = TaggedEvent(tag)
        return event


def tag_of(event) -> str:
    """The tag of an event ``create_tagged_event`` made (ValueError otherwise)."""
    if not isinstance(event, TaggedEvent):
        raise ValueError(f"tagged event {event} is not in use: create it with "
                         f"npu_create_tagged_event(tag)")
    return event.tag


def check_tag(tag: str, what: str) -> None:
    """AssertionError (TorchAir's words) when no tagged event has this tag."""
    if tag not in _TAGGED:
        raise AssertionError(f"tagged event is None while tag is {tag}, tagged event {what} "
                             f"failed, please make sure you have created tag {tag} with "
                             f"npu_create_tagged_event API.")


def _tagged_event_record(tag: str, created_inside: bool = False) -> None:
    check_tag(tag, "record")


def _tagged_event_wait(tag: str, created_inside: bool = False) -> None:
    check_tag(tag, "wait")


def _record_tagged_stream(input: torch.Tensor, tag: str) -> None:
    return None


def _record_tagged_stream_functional(input: torch.Tensor, tag: str) -> None:
    # keeping memory for a stream mutates nothing: the out-of-place operator, no copy back
    torch.ops.air.record_tagged_stream(input, tag)


_SCHEMAS = {
    "scope_enter": ("scope_enter(str[] keys, str[] values, bool need_execute=False) -> None",
                    _scope_enter, _scope_enter),
    "scope_exit": ("scope_exit(bool need_execute=False) -> None", _scope_exit, _scope_exit),
    "record": ("record(*, Device? device=None) -> Tensor", _record, _record),
    "wait": ("wait(Tensor[] x) -> ()", _wait, _wait),
    "wait_tensor": ("wait_tensor(Tensor self, Tensor dependency) -> Tensor", _wait_tensor,
                    _wait_tensor_fake),
    "tagged_event_record": ("tagged_event_record(str tag, bool created_inside=False) -> ()",
                            _tagged_event_record, _tagged_event_record),
    "tagged_event_wait": ("tagged_event_wait(str tag, bool created_inside=False) -> ()",
                          _tagged_event_wait, _tagged_event_wait),
    "record_tagged_stream": ("record_tagged_stream(Tensor input, str tag) -> ()",
                             _record_tagged_stream, _record_tagged_stream),
    "record_tagged_stream_": ("record_tagged_stream_(Tensor(a!) input, str tag) -> ()",
                              _record_tagged_stream, _record_tagged_stream),
}


# ---- print (TorchAir's torchair/ops/_print_ops.py schema), defined on first use -------------

PRINT_SCHEMA = ("print(Tensor[] tensors, str msg_format, str placeholder, int summarize_size, "
                "bool tensor_detail) -> None")


def _number(v: float) -> str:
    """One element as TorchAir prints it: an integral value without decimals, else 9
    significant digits (nan, inf as Python writes them)."""
    return f"{v:.0f}" if v.is_integer() else f"{v:.9g}"


def summarize(t: torch.Tensor, size: int) -> str:
    """``t``'s values in brackets, a dim's first and last ``size`` entries around "..." when
    it has more than ``2 * size`` (-1: every entry); inner dims on their own lines."""
    if size < -1 or size == 0:
        raise ValueError(f"summarize_size must be positive or -1 for all elements, got {size}")
    t = t.detach().cpu()
    t = t.float() if t.is_floating_point() or t.dtype == torch.bool else t.double()

    def walk(a: torch.Tensor) -> str:
        if a.dim() == 0:
            return _number(float(a.item()))
        n = a.shape[0]
        cut = 0 <= size and 2 * size < n
        parts = [walk(a[i]) for i in (range(size) if cut else range(n))]
        if cut:
            parts += ["..."] + [walk(a[i]) for i in range(n - size, n)]
        return "[" + (" " if a.dim() == 1 else "\n ").join(parts) + "]"

    return walk(t)


def _print(tensors: list[torch.Tensor], msg_format: str, placeholder: str, summarize_size: int,
           tensor_detail: bool) -> None:
    msg = msg_format
    for t in tensors:
        msg = msg.replace(placeholder, summarize(t, summarize_size), 1)
        if tensor_detail:
            msg = msg.replace(placeholder, str(list(t.shape)), 1)
    print(msg, flush=True)


def _print_fake(tensors, msg_format, placeholder, summarize_size, tensor_detail) -> None:
    return None


# whether air::print is defined (a flag torch.compile reads as a constant)
PRINT_READY = False


def define_print(torch_npu_installed: bool) -> None:
    """``air::print``: op_sdk's, defined with the other air operators, where torch_npu is not
    installed; where it is, TorchAir's (TorchAir defines it unconditionally when its print
    module is first imported), imported on first use."""
    global PRINT_READY
    if not _has("print"):
        if torch_npu_installed:
            import importlib

            try:
                importlib.import_module("torchair.ops._print_ops")
            except Exception:  # TorchAir fails to import: op_sdk's definition
                pass
        if not _has("print"):
            lib = _lib()
            lib.define(PRINT_SCHEMA)
            lib.impl("print", _print, "CompositeExplicitAutograd")
            torch.library.register_fake("air::print", _print_fake, lib=lib)
    has_side_effect(torch.ops.air.print.default)
    PRINT_READY = True


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
        if name == "record_tagged_stream_":
            lib.impl(name, _record_tagged_stream_functional, "Functionalize")
        defined.append(name)
    for name in AIR_SCOPE_OPS + AIR_EVENT_OPS:
        if _has(name) and name != "wait_tensor":
            has_side_effect(getattr(torch.ops.air, name).default)
    if not torch_npu_installed or _has("print"):
        define_print(torch_npu_installed)
    return defined
