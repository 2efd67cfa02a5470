"""What the pattern registries record while a fusion pass runs: matches (with their
effect and a picture of a few regions) and near misses (a named check that failed, an
intermediate with another user, the fused operator rejecting the inputs), into the report
that ``recording`` makes current. A report is any object with ``record_match``,
``record_near_miss``, ``near_misses`` and ``regions`` (the compiler's GraphReport)."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

from op_sdk.patterns.canonical import map_pattern
from op_sdk.patterns.tracing import TRACE_MEMO

__all__ = ["NearMiss", "NEAR_MISS_KINDS", "Check", "PatternRecord", "recording", "REPORT",
           "pattern_targets", "presence", "extra_users", "counting", "anchor_name"]

# Near-miss categories. "other_user": an intermediate that would disappear has another
# user; "alignment" / "dtype" / "shape" / "args": a failed extra check of that kind;
# "fused_op": the fused operator's own checks reject the inputs; "check": a user
# extra_check returned False; "stream": the nodes span streams (TorchAir's stream labels);
# "benefit": the benefit model predicts the replacement does not save more than
# experimental_config.fusion_benefit_threshold_us (op_sdk/patterns/benefit.py).
# (A fusion switched off for the mode is not a near miss: GraphReport.fusions_skipped.)
NEAR_MISS_KINDS = ("other_user", "alignment", "dtype", "shape", "args", "fused_op", "check",
                   "stream", "benefit")


@dataclasses.dataclass
class NearMiss:
    fusion: str          # the fusion (default fusion name or "user:<search_fn>")
    variant: str         # which of its variants
    node: str            # the graph node where the match was attempted (the anchor)
    kind: str            # one of NEAR_MISS_KINDS
    check: str           # the failing check's name ("" when none applies)
    reason: str          # one sentence for a human

    def __str__(self) -> str:
        where = f"{self.fusion}[{self.variant}] at {self.node}"
        return f"{where}: {self.kind}{'/' + self.check if self.check else ''}: {self.reason}"


REPORT: contextvars.ContextVar[Any] = contextvars.ContextVar(
    "op_sdk_pattern_report", default=None)


@contextlib.contextmanager
def recording(report: Any):
    """Make ``report`` receive matches / near misses, with a fresh trace memo."""
    t1 = REPORT.set(report)
    t2 = TRACE_MEMO.set({})
    try:
        yield
    finally:
        TRACE_MEMO.reset(t2)
        REPORT.reset(t1)


@dataclasses.dataclass(frozen=True)
class Check:
    """A named extra check: ``fn(match)`` returns None when satisfied, else the reason
    (reported as a near miss), or False when the match is not a candidate at all (say a
    5-D permute where the fusion wants a 3-D transpose: refused without a report).
    ``kind`` is the near-miss category ("alignment", "dtype", "shape", "args"). The match
    carries the name of the variant it is a match of (``match.op_sdk_variant``): a check
    may hand a match to another variant (False) by what that variant fixes."""

    name: str
    kind: str
    fn: Callable[[Any], str | None]


def anchor_name(match) -> str:
    try:
        node = match.output_nodes()[0]
        return node.name if node is not None else "?"
    except Exception:
        return "?"


@dataclasses.dataclass
class PatternRecord:
    """One registered replacement and what the reports call it."""

    fusion: str
    variant: str
    key: str                       # identity within a registry (dedupe)
    fns_key: str                   # the same, without the example inputs
    digest: str | None             # content digest for cache keys (None: not hashable)
    pattern: Any = None            # the PatternExpr registered
    entries: list = dataclasses.field(default_factory=list)
    targets: frozenset = frozenset()  # the operators every match contains
    _relaxed: Any = None

    def could_match(self, present: Callable[[Any], bool]) -> bool:
        return all(present(t) for t in self.targets)

    @property
    def name(self) -> str:
        return f"{self.fusion}[{self.variant}]"

    def relaxed(self):
        """The pattern with every user count relaxed, to find where only an extra user of
        an intermediate blocked a match (and which one)."""
        if self._relaxed is None and self.pattern is not None:
            self._relaxed = relax(self.pattern)
        return self._relaxed


def pattern_targets(pattern) -> frozenset:
    """The call_function targets a match of ``pattern`` must contain (getitem aside)."""
    import operator

    from torch._inductor import pattern_matcher as pm

    found, seen = set(), set()

    def go(p):
        if isinstance(p, (list, tuple)):
            for x in p:
                go(x)
            return
        if not isinstance(p, pm.PatternExpr) or id(p) in seen:
            return
        seen.add(id(p))
        if isinstance(p, pm._TargetArgsExpr):
            if p.op == "call_function" and len(p.fns) == 1 and p.fns[0] is not operator.getitem:
                found.add(p.fns[0])
            go(p.args)
            go(list(p.kwargs.values()))
        elif isinstance(p, pm.MultiOutputPattern):
            go(p.outputs)
        elif isinstance(p, pm.ListOf):
            go(p.pattern)

    go(pattern)
    return frozenset(found)


def presence(graph: torch.fx.Graph) -> Callable[[Any], bool]:
    cache: dict = {}

    def present(target) -> bool:
        if target not in cache:
            cache[target] = bool(graph.find_nodes(op="call_function", target=target))
        return cache[target]

    return present


def relax(pattern):
    from torch._inductor import pattern_matcher as pm

    def rebuild(p, go):
        q = copy.copy(p)
        if isinstance(p, pm._TargetArgsExpr):
            q.original_users = p.users
            q.users = pm.MULTIPLE
            q.args = tuple(go(a) for a in p.args)
            q.kwargs = {k: go(v) for k, v in p.kwargs.items()}
            q.flat_args_kwargs = q.flatten(q.args, q.kwargs)
        elif isinstance(p, pm.MultiOutputPattern):
            q.outputs = [go(o) for o in p.outputs]
        elif isinstance(p, pm.ListOf):
            q.pattern = go(p.pattern)
        return q

    return map_pattern(pattern, rebuild)


def extra_users(match) -> list[str]:
    """Intermediates of a relaxed match whose user count differs from the pattern's."""
    from torch._inductor import pattern_matcher as pm

    out = []
    ctx = match.ctx
    for p, node in ctx.pattern_to_node.items():
        if node is None or not isinstance(p, pm._TargetExpr) or p in ctx.outputs:
            continue
        want = getattr(p, "original_users", None)
        if not isinstance(want, int) or len(node.users) == want:
            continue
        others = [u.name for u in node.users if u not in match.nodes]
        what = _describe(node)
        out.append(f"intermediate {what} has {len(node.users)} users where the fusion needs "
                   f"{want}" + (f" (also used by {', '.join(others)})" if others else "")
                   + "; it would disappear after fusion")
    return out


def _describe(node: torch.fx.Node) -> str:
    import operator

    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        src = node.args[0]
        return f"'{node.name}' (output {node.args[1]} of {_short(src.target)})"
    return f"'{node.name}' ({_short(node.target)})"


def _short(target) -> str:
    name = getattr(target, "__name__", str(target))
    return str(target).replace("torch.ops.", "") if "." in str(target) else name


# regions drawn per (fusion, variant) and graph: enough to show each variant, cheap enough
# that a 61-layer graph pays nothing for them
REGIONS_PER_VARIANT = 2


def counting(apply, record: PatternRecord):
    def counted(match, graph, node):
        report = REPORT.get()
        if report is None:
            apply(match, graph, node)
            return
        from op_sdk.patterns.effects import match_effect, region_picture

        matched = [n for n in match.nodes if n.op == "call_function"]
        saved = match_effect(match)
        size = len(graph.nodes)
        draw = sum(1 for r in report.regions if r["fusion"] == record.fusion
                   and r["variant"] == record.variant) < REGIONS_PER_VARIANT
        before = set(graph.nodes) if draw else None
        picture = region_picture(match) if draw else None
        apply(match, graph, node)
        after = len(matched) - (size - len(graph.nodes))
        report.record_match(record.fusion, record.variant, len(matched), after, saved,
                            prediction=getattr(match, "op_sdk_prediction", None),
                            anchor=anchor_name_of(node))
        if draw:
            new_nodes = [n for n in graph.nodes if n not in before]
            report.regions.append({"fusion": record.fusion, "variant": record.variant,
                                   "anchor": anchor_name_of(node), "before": picture,
                                   "after": region_picture(None, new_nodes, matched)})

    return counted


def anchor_name_of(node) -> str:
    return getattr(node, "name", "?")
