"""One spelling per operation, for the graphs and for the patterns matched against them.

The same Python line reaches the passes spelled differently depending on who ran
AOTAutograd: ``x.view(..)`` is ``aten.view`` without decompositions and ``aten.reshape``
after Inductor's (its ``view_to_reshape``), ``x.transpose(0, 1)`` is ``aten.transpose``
or ``aten.permute``, ``x.to(torch.float32)`` is ``aten._to_copy`` or
``prims.convert_element_type``, and matmul leaves ``_unsafe_view``. A pattern written in
one spelling silently stops matching the other (TorchAir's patterns broke that way).

So the fusion stage first rewrites the graph into Inductor's spelling (what Inductor
lowers and what ``fwd_only`` traces), and every pattern graph goes through the same
function before it becomes a pattern. ``npu._npu_dtype_cast`` is an operator of its own
(torch_npu's lowering of ``.to()``) and stays as it is; the cast fusion has variants for it.
"""

from __future__ import annotations

import torch

aten, prims = torch.ops.aten, torch.ops.prims

__all__ = ["canonicalize", "CANONICAL_SPELLINGS"]

# original -> canonical (for the docs and the tests)
CANONICAL_SPELLINGS = {
    "aten.view.default": "aten.reshape.default",
    "aten._unsafe_view.default": "aten.reshape.default",
    "aten.transpose.int": "aten.permute.default",
    "aten._to_copy.default(dtype=...)": "prims.convert_element_type.default",
    "aten.add.Scalar / sub / mul / div": "aten.add.Tensor / sub / mul / div (scalar operand)",
}

_SCALAR_TO_TENSOR = {"add", "sub", "mul", "div"}


def _rank(node) -> int | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return val.dim() if isinstance(val, torch.Tensor) else None


def canonicalize(graph: torch.fx.Graph) -> int:
    """Rewrite the spellings above in place; returns the number of nodes rewritten."""
    changed = 0
    for target in (aten.view.default, aten._unsafe_view.default):
        for node in graph.find_nodes(op="call_function", target=target):
            node.target = aten.reshape.default
            changed += 1
    for node in graph.find_nodes(op="call_function", target=aten.transpose.int):
        rank = _rank(node.args[0])
        d0, d1 = node.args[1], node.args[2]
        if rank is None or not isinstance(d0, int) or not isinstance(d1, int):
            continue
        perm = list(range(rank))
        d0, d1 = d0 % rank, d1 % rank
        perm[d0], perm[d1] = perm[d1], perm[d0]
        node.target = aten.permute.default
        node.args = (node.args[0], perm)
        changed += 1
    for name in sorted(_SCALAR_TO_TENSOR):
        scalar, tensor = getattr(aten, name).Scalar, getattr(aten, name).Tensor
        for node in graph.find_nodes(op="call_function", target=scalar):
            node.target = tensor  # the same call: a Python number as the other operand
            changed += 1
    for node in graph.find_nodes(op="call_function", target=aten._to_copy.default):
        # only a pure dtype change is a convert_element_type; device / layout moves stay
        if len(node.args) == 1 and "dtype" in node.kwargs and _dtype_only(node):
            node.target = prims.convert_element_type.default
            node.args = (node.args[0], node.kwargs["dtype"])
            node.kwargs = {}
            changed += 1
    return changed


def _dtype_only(node) -> bool:
    """A ``_to_copy`` whose other keywords restate the input's layout and device."""
    src = node.args[0].meta.get("val") if isinstance(node.args[0], torch.fx.Node) else None
    for key, value in node.kwargs.items():
        if key == "dtype":
            continue
        if key == "layout" and value == torch.strided:
            continue
        if key == "device" and isinstance(src, torch.Tensor) and torch.device(value) == src.device:
            continue
        return False
    return True


def canonicalize_pattern(pattern):
    """The same for a hand-built ``PatternExpr`` (``search_fn_pattern``, TorchAir style):
    ``aten.view`` / ``_unsafe_view`` calls become ``aten.reshape``, a dtype-only
    ``aten._to_copy`` becomes ``prims.convert_element_type``. (A hand-built
    ``aten.transpose`` stays as it is: its rank, needed for the permutation, is unknown.)"""
    from torch._inductor import pattern_matcher as pm

    views = {aten.view.default, aten._unsafe_view.default}

    def rebuild(p, go):
        if type(p) is pm.CallFunction:
            args, kwargs = go(p.args), {k: go(v) for k, v in p.kwargs.items()}
            fns = list(p.fns)
            if set(fns) <= views:
                fns = [aten.reshape.default]
            elif fns == [aten._to_copy.default] and len(args) == 1 and set(kwargs) == {"dtype"}:
                fns, args, kwargs = [prims.convert_element_type.default], \
                    (args[0], kwargs["dtype"]), {}
            return pm.CallFunction(fns, *args, _users=p.users, **kwargs)
        if type(p) is pm.MultiOutputPattern:
            return pm.MultiOutputPattern([go(o) for o in p.outputs])
        if type(p) is pm.ListOf:
            return pm.ListOf(go(p.pattern), partial=p.partial)
        return p

    return map_pattern(pattern, rebuild)


def map_pattern(pattern, rebuild):
    """Rebuild a ``PatternExpr`` tree once per (possibly shared) node: ``rebuild(p, go)``
    returns what replaces pattern node ``p``, using ``go`` on its children; lists, tuples
    and literal arguments are walked or kept as they are."""
    from torch._inductor import pattern_matcher as pm

    memo: dict[int, object] = {}

    def go(p):
        if isinstance(p, (list, tuple)):
            return type(p)(go(x) for x in p)
        if not isinstance(p, pm.PatternExpr):
            return p
        if id(p) not in memo:
            memo[id(p)] = rebuild(p, go)
        return memo[id(p)]

    return go(pattern)
