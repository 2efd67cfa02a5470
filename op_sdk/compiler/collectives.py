"""TorchAir's traceable-collective remaps: ``torch.distributed.send`` / ``recv`` /
``broadcast`` / ``all_to_all`` traced by Dynamo as functional collectives, as TorchAir maps
them when it is imported (its ``adjust_traceable_collective_remaps``), so a compiled model
that calls them runs as one graph instead of breaking the graph at each call.

Dynamo replaces a function of ``traceable_collective_remaps`` by its value and finds that
value as an attribute of ``torch.distributed._functional_collectives`` (by its name): each
replacement below is put there too. They are installed by ``install()``, which
``get_npu_backend`` / npugraph_ex's backend, ``patch_for_hcom`` and ``python -m
op_sdk.as_torchair`` call (not ``import op_sdk``, which would import torch.distributed's
functional collectives for every user). Torch's own remaps (all_reduce, all_gather,
reduce_scatter, all_to_all_single, isend / irecv, ...) are kept.

Each replacement has the original's signature and result, and calls a blocking collective
operator of op_sdk's (``op_sdk_c10d::send`` / ``recv`` / ``broadcast`` / ``all_to_all``,
side-effecting: a graph keeps them in program order; each is done when it returns):
``recv`` copies what it received into its tensor and returns the source's global rank (a
``recv`` from any source cannot be traced: Dynamo falls back to the eager call),
``broadcast`` copies the broadcast value into its tensor, ``all_to_all`` exchanges the
list's tensors as one all-to-all of them stacked (every tensor of both lists the same
shape; anything else falls back to the eager call). ``async_op=True`` falls back to the
eager call (Dynamo's rule). Torch's functional broadcast / all_to_all_single are not used:
they take the group as ``Any``, which Inductor's C++ wrapper (max-autotune's) cannot pass.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

if dist.is_available():
    import torch.distributed._functional_collectives as funcol

__all__ = ["install"]


def _group(group, group_peer, peer):
    """(the group's name, the peer's global rank) of a call's arguments."""
    group = group or dist.group.WORLD
    if group_peer is not None:
        peer = dist.get_global_rank(group, group_peer)
    return funcol._resolve_group_name(group), peer


def op_sdk_send(tensor, dst=None, group=None, tag=0, group_dst=None):
    name, dst = _group(group, group_dst, dst)
    torch.ops.op_sdk_c10d.send(tensor, dst, tag, name)


def op_sdk_recv(tensor, src=None, group=None, tag=0, group_src=None):
    if src is None and group_src is None:
        raise ValueError("recv from any source (src=None) has no functional form")
    name, src = _group(group, group_src, src)
    tensor.copy_(torch.ops.op_sdk_c10d.recv(tensor, src, tag, name))
    return src


def op_sdk_broadcast(tensor, src=None, group=None, async_op=False, group_src=None):
    name, src = _group(group, group_src, src)
    tensor.copy_(torch.ops.op_sdk_c10d.broadcast(tensor, src, name))


def op_sdk_all_to_all(output_tensor_list, input_tensor_list, group=None, async_op=False):
    shape = input_tensor_list[0].shape
    if any(t.shape != shape for t in list(input_tensor_list) + list(output_tensor_list)):
        raise ValueError("all_to_all of tensors of different shapes has no functional form")
    name, _ = _group(group, None, None)
    out = torch.ops.op_sdk_c10d.all_to_all(torch.stack(list(input_tensor_list)), name)
    for k, t in enumerate(output_tensor_list):
        t.copy_(out[k])


# -- the operators: blocking collectives, done when they return ------------------------------
# (torch's functional broadcast / all_to_all_single take the group as ``Any``, which
# Inductor's C++ wrapper cannot pass, and its functional isend registers its work on an
# empty tensor that a wait does not find)

def _pg(group_name: str):
    from torch.distributed.distributed_c10d import _resolve_process_group

    return _resolve_process_group(group_name)


def _send(tensor, dst: int, tag: int, group_name: str) -> None:
    dist.send(tensor.contiguous(), dst, group=_pg(group_name), tag=tag)


def _recv(tensor, src: int, tag: int, group_name: str):
    out = torch.empty_like(tensor, memory_format=torch.contiguous_format)
    dist.recv(out, src, group=_pg(group_name), tag=tag)
    return out


def _broadcast(tensor, src: int, group_name: str):
    out = tensor.clone(memory_format=torch.contiguous_format)
    dist.broadcast(out, src, group=_pg(group_name))
    return out


def _all_to_all(stacked, group_name: str):
    out = torch.empty_like(stacked, memory_format=torch.contiguous_format)
    dist.all_to_all_single(out, stacked.contiguous(), group=_pg(group_name))
    return out


_OPS = {
    "send": ("send(Tensor tensor, int dst, int tag, str group_name) -> ()", _send,
             lambda *a: None),
    "recv": ("recv(Tensor tensor, int src, int tag, str group_name) -> Tensor", _recv,
             lambda t, *a: torch.empty_like(t, memory_format=torch.contiguous_format)),
    "broadcast": ("broadcast(Tensor tensor, int src, str group_name) -> Tensor", _broadcast,
                  lambda t, *a: torch.empty_like(t, memory_format=torch.contiguous_format)),
    "all_to_all": ("all_to_all(Tensor stacked, str group_name) -> Tensor", _all_to_all,
                   lambda t, *a: torch.empty_like(t, memory_format=torch.contiguous_format)),
}
_LIB: list = []


def _define() -> None:
    if _LIB:
        return
    lib = torch.library.Library("op_sdk_c10d", "DEF")  # noqa: TOR901
    for name, (schema, kernel, fake) in _OPS.items():
        lib.define(schema)
        lib.impl(name, kernel, "CompositeExplicitAutograd")
        torch.library.register_fake(f"op_sdk_c10d::{name}", fake, lib=lib)
        # a collective runs where the program puts it, never dropped or reordered
        torch.fx.node.has_side_effect(getattr(torch.ops.op_sdk_c10d, name).default)
    _LIB.append(lib)


def _remaps() -> dict:
    return {dist.send: op_sdk_send, dist.recv: op_sdk_recv, dist.broadcast: op_sdk_broadcast,
            dist.all_to_all: op_sdk_all_to_all}


def install() -> bool:
    """Adds the remaps (once per process); False where torch has no distributed support."""
    if not dist.is_available():
        return False
    _define()
    for original, replacement in _remaps().items():
        funcol.traceable_collective_remaps.setdefault(original, replacement)
        setattr(funcol, replacement.__name__, replacement)
    return True
