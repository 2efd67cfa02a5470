"""Building blocks of the fusions' extra checks.

A check reads the matched nodes' fake values and returns None when it holds, else one
sentence saying why not (that sentence is what the near-miss report shows). Sizes may
be symbolic: a check holds only when it is *statically known* to hold, and a check never
adds a guard (no ``bool(SymInt)``), so it cannot specialise the user's graph.
"""

from __future__ import annotations

import math
import operator

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true, sym_eq

from op_sdk.ops._common import CODE_OF

__all__ = ["node_of", "nodes_of", "val", "known", "known_multiple", "fmt", "dtype_code",
           "getitem_of"]


def node_of(match, target) -> torch.fx.Node | None:
    return next((n for n in match.nodes if n.target == target), None)


def nodes_of(match, target) -> list[torch.fx.Node]:
    return [n for n in match.nodes if n.target == target]


def getitem_of(match, source: torch.fx.Node, index: int) -> torch.fx.Node | None:
    return next((n for n in match.nodes if n.target is operator.getitem
                 and n.args[0] is source and n.args[1] == index), None)


def val(node):
    """The fake value of a node (or the constant itself)."""
    return node.meta.get("val") if isinstance(node, torch.fx.Node) else node


def known(cond) -> bool:
    """True only when ``cond`` (a bool or SymBool) is statically known to hold."""
    return statically_known_true(cond)


def same(a, b) -> bool:
    if isinstance(a, (list, tuple, torch.Size)) or isinstance(b, (list, tuple, torch.Size)):
        return len(a) == len(b) and known(sym_eq(tuple(a), tuple(b)))
    return known(sym_eq(a, b))


def known_multiple(x, m: int) -> bool:
    if isinstance(x, int):
        return x % m == 0
    return known(sym_eq(x % m, 0))


def prod(sizes):
    return math.prod(sizes) if sizes else 1


def fmt(x) -> str:
    if isinstance(x, (list, tuple, torch.Size)):
        return "[" + ", ".join(fmt(v) for v in x) + "]"
    return str(x)


def dtype_code(value) -> int | None:
    """An ``int dtype`` argument as its ScalarType code (it may arrive as a torch.dtype)."""
    if isinstance(value, torch.dtype):
        return CODE_OF.get(value)
    return value if isinstance(value, int) else None


HALF = (torch.float16, torch.bfloat16)


def half_inputs(x1, x2) -> str | None:
    """x1 and x2 both float16 or both bfloat16 (what the fused norm kernels take)."""
    a, b = val(x1), val(x2)
    if a.dtype in HALF and b.dtype == a.dtype:
        return None
    return (f"x1 / x2 are {a.dtype} / {b.dtype}; the fused operator takes both float16 or "
            "both bfloat16")
