"""What a compile did: the record ``op_sdk.explain()`` will show.

One ``CompileReport`` per backend call (one Dynamo graph), holding one ``GraphReport`` per
AOT graph the passes ran on (the forward or inference graph). A ``GraphReport`` has the
stages in the order they ran (time, node counts, dump files), per fusion and variant the
number of matches, and the near misses: a place where a pattern nearly fused, with the
category and the reason it did not (an intermediate with another user, a failed extra
check such as alignment, dtype or shape, or the fused operator rejecting the inputs).

The backend keeps its reports (``backend.reports``); ``recent_reports()`` keeps the last
few of the whole process for tools that have no backend object at hand.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any

from op_sdk.patterns.diagnostics import NEAR_MISS_KINDS, NearMiss

__all__ = ["PARTITIONED", "NearMiss", "StageRecord", "GraphReport", "CompileReport", "recent_reports",
           "NEAR_MISS_KINDS", "PREDICTED_SUMS"]

# the prediction fields summed per (fusion, variant) in GraphReport.effects
PREDICTED_SUMS = ("bytes_before", "bytes_after", "launches_before", "launches_after",
                  "seconds_before", "seconds_after", "tiling_loss", "benefit")


def _empty_effect() -> dict:
    return {"nodes_before": 0, "nodes_after": 0, "bytes_saved": 0, "predicted": 0,
            **{k: 0 for k in PREDICTED_SUMS}, "predictions": []}


@dataclasses.dataclass
class StageRecord:
    name: str                     # "post_grad_custom_pre_pass", "remove_noop_ops", ...
    seconds: float = 0.0
    nodes_before: int = 0         # call_function nodes
    nodes_after: int = 0
    skipped: str = ""             # why the stage did not run ("" when it ran)
    dumps: list[str] = dataclasses.field(default_factory=list)


# the executor suffix of an Inductor graph compiled one partition per stream region
PARTITIONED = "+streams"


@dataclasses.dataclass
class GraphReport:
    graph: str                    # "forward" / "inference" (+ id)
    mode: str
    executor: str                 # "inductor", "inductor-cpp", "eager", "cudagraphs"; an
                                  # Inductor one + PARTITIONED when compiled in partitions
    stages: list[StageRecord] = dataclasses.field(default_factory=list)
    matches: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    near_misses: list[NearMiss] = dataclasses.field(default_factory=list)
    fusions_enabled: tuple[str, ...] = ()
    fusions_skipped: dict[str, str] = dataclasses.field(default_factory=dict)  # name -> why
    # per (fusion, variant): nodes matched, nodes left in their place, and the estimated
    # bytes of memory traffic saved (each intermediate that disappears was written once
    # and read at least once); with the benefit model on (op_sdk/patterns/benefit.py) also
    # the predicted bytes / launches / seconds of the unfused and fused sides summed over
    # the matches, the predicted benefit, and "predictions": one dict per match
    # (Prediction.as_dict() plus its anchor node)
    effects: dict = dataclasses.field(default_factory=dict)
    regions: list = dataclasses.field(default_factory=list)  # pictures of a few matches
    # node name -> stream, for graphs with air stream scopes (op_sdk/compiler/streams.py);
    # empty when the graph runs on one stream
    streams: dict[str, str] = dataclasses.field(default_factory=dict)

    # -- recording (called by the pattern machinery) --------------------------------------

    def record_match(self, fusion: str, variant: str, nodes_before: int = 0,
                     nodes_after: int = 0, bytes_saved: int = 0, prediction=None,
                     anchor: str = "") -> None:
        """One match; ``prediction`` is the benefit model's (op_sdk.benefit.Prediction)
        when the model decided it."""
        self.matches[(fusion, variant)] += 1
        eff = self.effects.setdefault((fusion, variant), _empty_effect())
        eff["nodes_before"] += nodes_before
        eff["nodes_after"] += nodes_after
        eff["bytes_saved"] += bytes_saved
        if prediction is not None:
            p = prediction.as_dict()
            eff["predicted"] += 1
            for key in PREDICTED_SUMS:
                eff[key] += p[key]
            eff["predictions"].append({"anchor": anchor, **p})

    def predicted(self, fusion: str | None = None) -> list[dict]:
        """The per-match predictions of the applied matches (of ``fusion``)."""
        return [p for (f, _), e in self.effects.items() if fusion is None or f == fusion
                for p in e["predictions"]]

    def record_near_miss(self, miss: NearMiss) -> None:
        key = (miss.fusion, miss.node, miss.kind, miss.check, miss.reason)
        if all((m.fusion, m.node, m.kind, m.check, m.reason) != key for m in self.near_misses):
            self.near_misses.append(miss)

    # -- reading --------------------------------------------------------------------------

    def match_count(self, fusion: str | None = None, variant: str | None = None) -> int:
        return sum(n for (f, v), n in self.matches.items()
                   if (fusion is None or f == fusion) and (variant is None or v == variant))

    def misses(self, fusion: str | None = None, kind: str | None = None) -> list[NearMiss]:
        return [m for m in self.near_misses
                if (fusion is None or m.fusion == fusion) and (kind is None or m.kind == kind)]

    def stage(self, name: str) -> StageRecord | None:
        return next((s for s in self.stages if s.name == name), None)

    @property
    def pass_seconds(self) -> float:
        return sum(s.seconds for s in self.stages)

    def summary(self) -> str:
        lines = [f"{self.graph} graph ({self.mode}, executed by {self.executor})"]
        for s in self.stages:
            state = f"skipped: {s.skipped}" if s.skipped else \
                f"{s.nodes_before} -> {s.nodes_after} nodes, {s.seconds * 1e3:.1f} ms"
            lines.append(f"  {s.name}: {state}")
        for (fusion, variant), n in sorted(self.matches.items()):
            line = f"  fused {fusion}[{variant}] x{n}"
            eff = self.effects.get((fusion, variant))
            if eff and eff["predicted"]:
                line += (f": predicted {eff['bytes_before']:,} -> {eff['bytes_after']:,} B, "
                         f"{eff['launches_before']} -> {eff['launches_after']} launches, "
                         f"benefit {eff['benefit'] * 1e6:.2f} us")
            lines.append(line)
        for name, why in self.fusions_skipped.items():
            lines.append(f"  not run: {name}: {why}")
        for m in self.near_misses:
            lines.append(f"  near miss: {m}")
        if self.streams:
            lines.append(f"  streams ({self.stream_execution}):")
            for stream, nodes in self.nodes_by_stream().items():
                lines.append(f"    {stream}: {', '.join(nodes)}")
        return "\n".join(lines)

    def nodes_by_stream(self) -> dict[str, list[str]]:
        """Stream -> its nodes (graph order), the main stream first."""
        out: dict[str, list[str]] = {}
        for node, stream in self.streams.items():
            out.setdefault(stream, []).append(node)
        if "main" in out:
            out = {"main": out.pop("main"), **out}
        return out

    @property
    def stream_execution(self) -> str:
        """How the streams run with this graph's executor."""
        if self.executor.startswith("inductor"):
            if self.executor.endswith(PARTITIONED):
                return ("one Inductor partition per stream region, concurrently: CPU worker "
                        "threads, or CUDA side streams")
            return "Inductor runs them in order on one thread"
        if self.executor == "cudagraphs":
            return "CUDA side streams, captured into the CUDA graph"
        return "concurrently: CPU worker threads, or CUDA side streams"


@dataclasses.dataclass
class CompileReport:
    """One backend call: the graphs compiled for one Dynamo frame."""

    index: int
    mode: str
    graphs: list[GraphReport] = dataclasses.field(default_factory=list)
    seconds: float = 0.0          # the whole backend call
    cache: str = ""               # "hit" when Inductor served the graph from its cache

    @property
    def pass_seconds(self) -> float:
        return sum(g.pass_seconds for g in self.graphs)

    def match_count(self, fusion: str | None = None, variant: str | None = None) -> int:
        return sum(g.match_count(fusion, variant) for g in self.graphs)

    def misses(self, fusion: str | None = None, kind: str | None = None) -> list[NearMiss]:
        return [m for g in self.graphs for m in g.misses(fusion, kind)]

    def summary(self) -> str:
        head = f"compile #{self.index} ({self.mode}, {self.seconds:.2f} s"
        head += f", passes {self.pass_seconds * 1e3:.1f} ms"
        head += ", Inductor cache hit: passes did not run)" if self.cache == "hit" else ")"
        return "\n".join([head] + [g.summary() for g in self.graphs])

    def to_dict(self) -> dict[str, Any]:
        def graph(g: GraphReport):
            return {
                "graph": g.graph, "mode": g.mode, "executor": g.executor,
                "stages": [dataclasses.asdict(s) for s in g.stages],
                "matches": [{"fusion": f, "variant": v, "count": n}
                            for (f, v), n in sorted(g.matches.items())],
                "near_misses": [dataclasses.asdict(m) for m in g.near_misses],
                "fusions_enabled": list(g.fusions_enabled),
                "fusions_skipped": dict(g.fusions_skipped),
                "effects": [{"fusion": f, "variant": v, **e}
                            for (f, v), e in sorted(g.effects.items())],
                "regions": list(g.regions),
                "streams": dict(g.streams),
            }
        return {"index": self.index, "mode": self.mode, "seconds": self.seconds,
                "cache": self.cache, "graphs": [graph(g) for g in self.graphs]}


_RECENT: collections.deque[CompileReport] = collections.deque(maxlen=32)
_LOCK = threading.Lock()


def remember(report: CompileReport) -> None:
    with _LOCK:
        _RECENT.append(report)


def recent_reports() -> list[CompileReport]:
    """The last compile reports of this process, oldest first."""
    with _LOCK:
        return list(_RECENT)
