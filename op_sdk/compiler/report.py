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
    # TorchAir scope region (super_kernel 'name', limit_core_num(a, v), op_never_timeout,
    # data_dump) -> its operators (op_sdk/compiler/streams.py, scope_regions)
    scopes: dict[str, list[str]] = dataclasses.field(default_factory=dict)

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

    def outcome(self) -> str:
        """One line: what the fusion passes did to this graph and, where a candidate did
        not fuse, why and what to set (the INFO line of each compile, the head of
        ``summary`` and of ``op_sdk.explain``)."""
        from op_sdk.benefit import Prediction

        fused = collections.Counter()
        for (fusion, _), n in self.matches.items():
            fused[fusion] += n
        parts = [("fused " + ", ".join(f"{f} x{n}" for f, n in sorted(fused.items())))
                 if fused else "no fusion applied"]
        refused = collections.Counter(m.fusion for m in self.misses(kind="benefit"))
        if refused:
            devices = sorted({Prediction.device_of(m.reason) or "?"
                              for m in self.misses(kind="benefit")})
            where = " / ".join("this CPU" if d == "cpu" else d.upper() for d in devices)
            hint = ("" if devices == ["npu"] else
                    "set experimental_config.fusion_benefit_device = 'npu' to see the NPU "
                    "plan, or ")
            parts.append(f"the benefit model refused "
                         f"{', '.join(f'{f} x{n}' for f, n in sorted(refused.items()))}: it "
                         f"predicts no gain on {where}; {hint}"
                         f"fusion_benefit_threshold_us = None to apply every match")
        others = [m for m in self.near_misses if m.kind != "benefit"]
        if others:
            kinds = collections.Counter(m.kind for m in others)
            parts.append(f"{len(others)} near miss{'es' if len(others) > 1 else ''} ("
                         + ", ".join(f"{k} x{n}" for k, n in sorted(kinds.items()))
                         + "): op_sdk.explain() gives each reason")
        if not fused and not refused and not others:
            off = [f"{s.name} off ({s.skipped})" for s in self.stages
                   if s.name in ("native_ops", "pattern_fusion") and s.skipped]
            parts.append("; ".join(off) if off else
                         "no fusion pattern or native_ops rule matched this graph")
        return "; ".join(parts)

    def summary(self) -> str:
        lines = [f"{self.graph} graph ({self.mode}, executed by {self.executor}): "
                 f"{self.outcome()}"]
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
        if self.scopes:
            lines.append("  scopes:")
            for region, nodes in self.scopes.items():
                lines.append(f"    {region}: {', '.join(nodes)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data (``from_dict`` reads it back)."""
        return {
            "graph": self.graph, "mode": self.mode, "executor": self.executor,
            "stages": [dataclasses.asdict(s) for s in self.stages],
            "matches": [{"fusion": f, "variant": v, "count": n}
                        for (f, v), n in sorted(self.matches.items())],
            "near_misses": [dataclasses.asdict(m) for m in self.near_misses],
            "fusions_enabled": list(self.fusions_enabled),
            "fusions_skipped": dict(self.fusions_skipped),
            "effects": [{"fusion": f, "variant": v, **e}
                        for (f, v), e in sorted(self.effects.items())],
            "regions": list(self.regions),
            "streams": dict(self.streams),
            "scopes": {k: list(v) for k, v in self.scopes.items()},
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> GraphReport:
        effects = {}
        for e in d["effects"]:
            e = dict(e)
            effects[(e.pop("fusion"), e.pop("variant"))] = e
        return cls(graph=d["graph"], mode=d["mode"], executor=d["executor"],
                   stages=[StageRecord(**s) for s in d["stages"]],
                   matches=collections.Counter({(m["fusion"], m["variant"]): m["count"]
                                                for m in d["matches"]}),
                   near_misses=[NearMiss(**m) for m in d["near_misses"]],
                   fusions_enabled=tuple(d["fusions_enabled"]),
                   fusions_skipped=dict(d["fusions_skipped"]), effects=effects,
                   regions=list(d["regions"]), streams=dict(d["streams"]),
                   scopes={k: list(v) for k, v in d.get("scopes", {}).items()})

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
    # "hit" when Inductor served the graph from its cache (the passes did not run): the
    # graphs are then those the passes recorded in the compile that filled the cache
    # (stored beside it, compiler/record_store.py), or none where no record was stored
    cache: str = ""

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
        note = self.cache_note()
        return "\n".join([head + (f", {note})" if note else ")")]
                         + [g.summary() for g in self.graphs])

    def cache_note(self) -> str:
        """What a cache hit means for this report ('' when the passes ran)."""
        if self.cache != "hit":
            return ""
        if self.graphs:
            return ("Inductor cache hit: the passes did not run; what they did in the "
                    "compile that filled the cache:")
        return ("Inductor cache hit: the passes did not run, and no record of them is "
                "stored for this graph; torch._inductor.config.fx_graph_cache = False (or "
                "TORCHINDUCTOR_FX_GRAPH_CACHE=0) compiles it with them again")

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "mode": self.mode, "seconds": self.seconds,
                "cache": self.cache, "graphs": [g.to_dict() for g in self.graphs]}


_RECENT: collections.deque[CompileReport] = collections.deque(maxlen=32)
_LOCK = threading.Lock()


def remember(report: CompileReport) -> None:
    with _LOCK:
        _RECENT.append(report)


def recent_reports() -> list[CompileReport]:
    """The last compile reports of this process, oldest first."""
    with _LOCK:
        return list(_RECENT)
