"""No-op removal: views, casts and copies that change nothing.

Inductor's ``remove_noop_ops`` knows ``aten.view``, ``convert_element_type``, ``clone``,
no-op slices and a few more; graphs that went through Inductor's AOT step spell views
as ``aten.reshape`` and matmul leaves ``_unsafe_view`` / ``expand`` of the same shape,
which it does not know. Stray no-op views block pattern matches, so this stage adds
those, with the same aliasing rules (never make a graph output alias an input or another
output where it did not before).
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq

aten = torch.ops.aten

__all__ = ["remove_noop_ops"]


def _same_shape(node: torch.fx.Node) -> bool:
    src = node.args[0]
    if not isinstance(src, torch.fx.Node):
        return False
    a, b = src.meta.get("val"), node.meta.get("val")
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return False
    return statically_known_true(sym_eq(a.shape, b.shape))


def _identity_permute(node: torch.fx.Node) -> bool:
    dims = node.args[1]
    return isinstance(dims, (list, tuple)) and list(dims) == list(range(len(dims)))


_EXTRA_NOOPS = {
    aten.reshape.default: _same_shape,
    aten._unsafe_view.default: _same_shape,
    aten.expand.default: _same_shape,
    aten.permute.default: _identity_permute,
}


def remove_noop_ops(gm: torch.fx.GraphModule) -> None:
    from torch._inductor.fx_passes.post_grad import remove_noop_ops as inductor_remove_noop_ops
    from torch._inductor.fx_passes.post_grad import same_meta
    from torch._inductor.fx_utils import get_node_storage

    graph = gm.graph
    inductor_remove_noop_ops(graph)

    inputs = set(graph.find_nodes(op="placeholder"))
    input_storages = {get_node_storage(n) for n in inputs}
    output_node = graph.output_node()
    outputs = output_node.args[0]
    outputs = outputs if isinstance(outputs, (list, tuple)) else (outputs,)
    output_storages = {get_node_storage(n) for n in outputs if isinstance(n, torch.fx.Node)}

    for target, is_noop in _EXTRA_NOOPS.items():
        for node in graph.find_nodes(op="call_function", target=target):
            src = node.args[0]
            if not isinstance(src, torch.fx.Node) or not is_noop(node):
                continue
            if not same_meta(node, src):  # strides too: a layout change is not a no-op
                continue
            # these are all views of src: never let a graph output become a graph input
            # or another output through the removal
            if node in outputs and (src in inputs or src in outputs):
                continue
            node_storage = get_node_storage(node)
            if (node_storage != get_node_storage(src) and node_storage in output_storages
                    and (get_node_storage(src) in input_storages
                         or get_node_storage(src) in output_storages)):
                continue
            node.replace_all_uses_with(src)
            graph.erase_node(node)
