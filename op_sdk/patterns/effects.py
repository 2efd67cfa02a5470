"""What one fusion match changes in the graph: bytes of memory traffic saved (estimated)
and small pictures of the region before and after, for the reports."""

from __future__ import annotations

import operator

import torch


def _nbytes(val) -> int:
    """Bytes of a tensor, symbolic sizes at their hint (op_sdk/patterns/benefit.py)."""
    from op_sdk.patterns.benefit import nbytes

    return nbytes(val)


def match_effect(match) -> int:
    """Estimated bytes of memory traffic a match saves: every tensor the matched nodes
    materialise that no longer exists afterwards was written once and read once (view ops
    materialise nothing; a tuple output nobody reads was only written)."""
    outputs = set(match.output_nodes())
    nodes = [n for n in match.nodes if n.op == "call_function"]
    saved = 0
    for n in nodes:
        if n in outputs or getattr(n.target, "is_view", False):
            continue
        val = n.meta.get("val")
        if isinstance(val, (tuple, list)):
            read = {u.args[1] for u in n.users if u.target is operator.getitem}
            saved += sum(_nbytes(v) for i, v in enumerate(val) if i not in read)
        else:  # a tensor (getitem of a tuple op, or a plain op): written and read
            saved += 2 * _nbytes(val)
    return saved


def _label(n: torch.fx.Node) -> str:
    target = n.target
    if n.op != "call_function":
        return n.name
    name = getattr(target, "__name__", str(target))
    if isinstance(target, torch._ops.OpOverload):
        name = target._opname
    return name


def region_picture(match, nodes=None) -> dict:
    """``{"nodes": [...], "edges": [...]}`` of the matched nodes (or of ``nodes``): their
    operators, the values flowing in, and where results flow out. getitem nodes are folded
    into the edges of the operator they unpack."""
    region = [n for n in (match.nodes if match is not None else nodes) if n.op == "call_function"]
    inside = set(region)

    def source(n):  # getitem(x, i) is drawn as x
        while n.op == "call_function" and n.target is operator.getitem and n in inside:
            n = n.args[0]
        return n

    kinds = {}
    out_nodes, edges, seen_inputs = [], set(), {}
    for n in region:
        if n.target is operator.getitem:
            continue
        fused = isinstance(n.target, torch._ops.OpOverload) and n.target.namespace == "npu" \
            and match is None
        kinds[n.name] = "fused" if fused else "op"
        out_nodes.append({"id": n.name, "label": _label(n), "kind": kinds[n.name]})
    for n in region:
        if n.target is operator.getitem:
            continue
        for a in n.all_input_nodes:
            src = source(a)
            if src in inside:
                edges.add((src.name, n.name))
            elif isinstance(src.meta.get("val"), torch.Tensor) or src.op == "placeholder":
                key = f"in:{src.name}"
                if key not in seen_inputs:
                    seen_inputs[key] = {"id": key, "label": src.name, "kind": "input"}
                edges.add((key, n.name))
    escaping = {}
    for n in region:
        for u in n.users:
            if u not in inside:
                escaping.setdefault(source(n).name, []).append(u.name)
    for producer, users in escaping.items():
        key = f"out:{producer}"
        label = ", ".join(users[:2]) + ("…" if len(users) > 2 else "")
        out_nodes.append({"id": key, "label": f"→ {label}", "kind": "output"})
        edges.add((producer, key))
    return {"nodes": list(seen_inputs.values()) + out_nodes,
            "edges": [list(e) for e in sorted(edges)]}
