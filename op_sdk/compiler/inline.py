"""The ``inline_kernels`` stage: after the fusion passes, each op_sdk operator call left in a
graph Inductor compiles for CUDA is replaced by what its kernel is made of, traced
(library.INLINE_DEVICES): a Triton launcher's allocations and its kernel launches
(``triton_kernel_wrapper_functional``, which Inductor's own passes make in-place and its
generated code launches, with no Python per call), or a reference's ATen ops (which Inductor
fuses).

op_sdk's backend traces the graph with every operator kept one call
(``library.inline_calls(False)``), so that its fusion passes see the operators they match;
plain torch.compile traces through them while AOTAutograd functionalizes.
"""

from __future__ import annotations

import operator

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten


def inline_operators(gm: torch.fx.GraphModule) -> int:
    """Replace each traced-through operator call in ``gm`` (on one device of
    INLINE_DEVICES) by its traced kernel, decomposed by Inductor's table; returns how many."""
    from torch._guards import detect_fake_mode
    from torch._inductor.decomposition import select_decomp_table
    from torch._subclasses.functional_tensor import dispatch_functionalize
    from torch.fx.experimental.proxy_tensor import make_fx

    from op_sdk.library import inline_calls, tensors_device, traced_through

    graph, count = gm.graph, 0
    decompositions = select_decomp_table()
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        flat, spec = tree_flatten((node.args, node.kwargs))
        values = [a.meta.get("val") if isinstance(a, torch.fx.Node) else a for a in flat]
        device = tensors_device(values)
        if device is None or not traced_through(node.target, device):
            continue
        inputs = [i for i, a in enumerate(flat) if isinstance(a, torch.fx.Node)]
        if any(values[i] is None for i in inputs) or "val" not in node.meta:
            continue
        if isinstance(node.meta["val"], (tuple, list)) and any(
                u.op != "call_function" or u.target is not operator.getitem for u in node.users):
            continue  # its tuple used whole: left a call
        op = node.target

        def call(*ins, _values=values, _inputs=inputs, _spec=spec, _op=op):
            vals = list(_values)
            for i, v in zip(_inputs, ins):
                vals[i] = v
            args, kwargs = tree_unflatten(vals, _spec)
            return _op(*args, **kwargs)

        fake_mode = detect_fake_mode([values[i] for i in inputs])
        # in the IR Inductor lowers after its post-grad passes: decomposed by its table
        # (aten._to_copy as prims.convert_element_type, ...), as AOTAutograd decomposes
        with fake_mode, inline_calls(True):
            sub = make_fx(dispatch_functionalize(call), decomposition_table=decompositions,
                          tracing_mode="real")(*[values[i] for i in inputs])
        _splice(gm, node, sub, [flat[i] for i in inputs])
        count += 1
    if count:
        graph.eliminate_dead_code()
        graph.lint()
        gm.recompile()
    return count


def _splice(gm: torch.fx.GraphModule, node: torch.fx.Node, sub: torch.fx.GraphModule,
            inputs: list) -> None:
    """Copy ``sub``'s nodes before ``node`` (its placeholders bound to ``inputs``, its
    constants carried over as attributes of ``gm``) and hand ``node``'s users its outputs."""
    env: dict[torch.fx.Node, object] = {}
    placeholders = [n for n in sub.graph.nodes if n.op == "placeholder"]
    env.update(zip(placeholders, inputs))
    result = None
    with gm.graph.inserting_before(node):
        for n in sub.graph.nodes:
            if n.op == "placeholder":
                continue
            if n.op == "output":
                result = tree_map(lambda x: env[x] if isinstance(x, torch.fx.Node) else x,
                                  n.args[0])
                break
            if n.op == "get_attr":  # a constant the kernel made (a table of indices)
                name = _fresh_attr(gm, n.target)
                setattr(gm, name, getattr(sub, n.target))
                env[n] = gm.graph.get_attr(name)
                env[n].meta = dict(n.meta)
                continue
            env[n] = gm.graph.node_copy(n, lambda x: env[x])
    if isinstance(result, (tuple, list)):
        for user in list(node.users):  # each a getitem (inline_operators checked)
            user.replace_all_uses_with(result[user.args[1]])
            gm.graph.erase_node(user)
    else:
        node.replace_all_uses_with(result)
    gm.graph.erase_node(node)


def _fresh_attr(gm: torch.fx.GraphModule, base: str) -> str:
    name, i = f"_op_sdk_{base}", 0
    while hasattr(gm, name):
        i += 1
        name = f"_op_sdk_{base}_{i}"
    return name
