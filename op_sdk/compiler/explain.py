"""``op_sdk.explain()``: which fusions fired in a compile, what they saved (estimated
bytes, and the benefit model's predicted bytes, launches and time), and why the others
did not (near misses, the model's refusals among them: kind "benefit"), as an object
tests can assert on and tools can render."""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

from op_sdk.compiler.report import CompileReport, NearMiss, recent_reports

__all__ = ["Explanation", "explain"]


@dataclasses.dataclass
class Explanation:
    """The fusion record of one or more backend calls (one per Dynamo graph)."""

    reports: list[CompileReport]

    @property
    def patterns(self) -> dict[str, int]:
        """Fusion name -> number of matches."""
        out: dict[str, int] = collections.Counter()
        for r in self.reports:
            for g in r.graphs:
                for (fusion, _), n in g.matches.items():
                    out[fusion] += n
        return dict(out)

    @property
    def variants(self) -> dict[tuple[str, str], int]:
        out: dict = collections.Counter()
        for r in self.reports:
            for g in r.graphs:
                out.update(g.matches)
        return dict(out)

    @property
    def near_misses(self) -> list[NearMiss]:
        return [m for r in self.reports for m in r.misses()]

    def misses(self, fusion: str | None = None, kind: str | None = None) -> list[NearMiss]:
        return [m for r in self.reports for m in r.misses(fusion, kind)]

    def match_count(self, fusion: str | None = None) -> int:
        return sum(r.match_count(fusion) for r in self.reports)

    @property
    def regions(self) -> list[dict]:
        return [reg for r in self.reports for g in r.graphs for reg in g.regions]

    @property
    def dumps(self) -> list[str]:
        return [d for r in self.reports for g in r.graphs for s in g.stages for d in s.dumps]

    def table(self) -> list[dict]:
        """One row per fusion: matches, nodes before / after, estimated bytes saved, and
        the benefit model's predictions summed over the applied matches (bytes and
        launches of the unfused / fused sides, benefit in us; ``predicted`` matches had
        a prediction) with the candidates it refused (``rejected``)."""
        rows: dict[str, dict] = {}

        def row(fusion):
            return rows.setdefault(fusion, {
                "pattern": fusion, "matches": 0, "nodes_before": 0, "nodes_after": 0,
                "bytes_saved": 0, "predicted": 0, "bytes_before": 0, "bytes_after": 0,
                "launches_before": 0, "launches_after": 0, "benefit_us": 0.0, "rejected": 0})

        for r in self.reports:
            for g in r.graphs:
                for (fusion, _), n in g.matches.items():
                    row(fusion)["matches"] += n
                for (fusion, _), eff in g.effects.items():
                    out = row(fusion)
                    for k in ("nodes_before", "nodes_after", "bytes_saved", "predicted",
                              "bytes_before", "bytes_after", "launches_before",
                              "launches_after"):
                        out[k] += eff.get(k, 0)
                    out["benefit_us"] += eff.get("benefit", 0.0) * 1e6
                for m in g.misses(kind="benefit"):
                    row(m.fusion)["rejected"] += 1
        return list(rows.values())

    def predictions(self, fusion: str | None = None) -> list[dict]:
        """The benefit model's prediction of each applied match (of ``fusion``):
        ``op_sdk.benefit.Prediction.as_dict()`` plus the fusion, variant and anchor."""
        return [{"fusion": f, "variant": v, **p} for r in self.reports for g in r.graphs
                for (f, v), e in g.effects.items() if fusion is None or f == fusion
                for p in e.get("predictions", ())]

    def summary(self) -> str:
        if not self.reports:
            return "no compile recorded"
        return "\n\n".join(r.summary() for r in self.reports)

    def to_dict(self) -> dict[str, Any]:
        return {"patterns": self.patterns, "fusions": self.table(),
                "predictions": self.predictions(),
                "near_misses": [dataclasses.asdict(m) for m in self.near_misses],
                "compiles": [r.to_dict() for r in self.reports]}

    def __str__(self) -> str:
        return self.summary()


def explain(backend=None) -> Explanation:
    """The fusion record of ``backend`` (an ``op_sdk.get_npu_backend()`` object: all its
    compiles), or, without one, of the most recent backend call in this process."""
    if backend is not None:
        reports = getattr(backend, "reports", None)
        if reports is None:
            raise TypeError(f"op_sdk.explain: expected the backend returned by "
                            f"op_sdk.get_npu_backend(), got {type(backend).__name__}")
        return Explanation(list(reports))
    recent = recent_reports()
    return Explanation(recent[-1:])

