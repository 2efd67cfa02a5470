"""What one fusion match changes in the graph: bytes of memory traffic saved (estimated)
and small pictures of the region before and after, for the reports."""

from __future__ import annotations

import operator
import os
import re

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


# operators that only reinterpret or move a tensor's layout: drawn as views, not as
# unfused computation
_VIEWS = {"view", "_unsafe_view", "reshape", "expand", "permute", "transpose", "t", "squeeze",
          "unsqueeze", "slice", "select", "alias", "clone", "contiguous", "flatten", "split",
          "split_with_sizes", "chunk", "as_strided"}


def _source(n: torch.fx.Node) -> str:
    """The user's source line a node comes from ("model.py:42"), from its stack trace."""
    found = re.findall(r'File "([^"]+)", line (\d+)', n.meta.get("stack_trace") or "")
    if not found:
        return ""
    path, line = found[-1]
    return f"{os.path.basename(path)}:{line}"


def _value(n: torch.fx.Node) -> str:
    """A value's dtype and shape ("bf16[2, 7, 32]"), where the node has one."""
    v = n.meta.get("val")
    if isinstance(v, (tuple, list)) and v and isinstance(v[0], torch.Tensor):
        v = v[0]
    if not isinstance(v, torch.Tensor):
        return ""
    dt = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32",
          torch.int8: "int8", torch.int32: "int32", torch.int64: "int64"}.get(
        v.dtype, str(v.dtype).replace("torch.", ""))
    return f"{dt}[{', '.join(str(d) for d in v.shape)}]"


def _span(nodes) -> str:
    """The source lines of ``nodes`` as one span ("model.py:165-167"; files joined)."""
    lines: dict[str, list[int]] = {}
    for n in nodes:
        where = _source(n)
        if where:
            f, line = where.rsplit(":", 1)
            lines.setdefault(f, []).append(int(line))
    return ", ".join(f"{f}:{min(v)}" + (f"-{max(v)}" if max(v) != min(v) else "")
                     for f, v in lines.items())


def region_picture(match, nodes=None, fused_from=None) -> dict:
    """``{"nodes": [...], "edges": [...]}`` of the matched nodes (or of ``nodes``): their
    operators (with the source line each comes from), the values flowing in (labelled by
    what produces them and their dtype and shape), and where results flow out. getitem
    nodes are folded into the edges of the operator they unpack; layout-only operators
    (views, reshapes, transposes) are of kind "view". A replacement node without a source
    line of its own shows the span of ``fused_from`` (the matched nodes)."""
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
        label = _label(n)
        kinds[n.name] = "fused" if fused else "view" if label in _VIEWS else "op"
        out_nodes.append({"id": n.name, "label": label, "kind": kinds[n.name],
                          "source": _source(n) or (_span(fused_from) if fused_from else "")})
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
                    what = ("input" if src.op == "placeholder" else
                            f"{_label(src.args[0])}[{src.args[1]}]"
                            if src.target is operator.getitem else _label(src))
                    seen_inputs[key] = {"id": key, "label": f"{what} {_value(src)}".strip(),
                                        "kind": "input"}
                edges.add((key, n.name))
    escaping = {}
    for n in region:
        for u in n.users:
            if u not in inside:
                escaping.setdefault(source(n).name, []).append(u.name)
    by_name = {n.name: n for n in region}
    for producer, users in escaping.items():
        key = f"out:{producer}"
        n = by_name.get(producer)
        label = f"→ {len(users)} user{'s' if len(users) > 1 else ''}"
        if n is not None and _value(n):
            label += f" {_value(n)}"
        out_nodes.append({"id": key, "label": label, "kind": "output"})
        edges.add((producer, key))
    return {"nodes": list(seen_inputs.values()) + out_nodes,
            "edges": [list(e) for e in sorted(edges)]}
