"""``op_sdk.explain()``: which fusions fired in a compile, what they saved, and why the
others did not, as an object tests can assert on and tools can render."""

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
        """One row per fusion: matches, nodes before / after, estimated bytes saved."""
        rows: dict[str, dict] = {}
        for r in self.reports:
            for g in r.graphs:
                for (fusion, _), n in g.matches.items():
                    row = rows.setdefault(fusion, {"pattern": fusion, "matches": 0,
                                                   "nodes_before": 0, "nodes_after": 0,
                                                   "bytes_saved": 0})
                    row["matches"] += n
                for (fusion, _), eff in g.effects.items():
                    row = rows[fusion]
                    for k in ("nodes_before", "nodes_after", "bytes_saved"):
                        row[k] += eff[k]
        return list(rows.values())

    def summary(self) -> str:
        if not self.reports:
            return "no compile recorded"
        return "\n\n".join(r.summary() for r in self.reports)

    def to_dict(self) -> dict[str, Any]:
        return {"patterns": self.patterns, "fusions": self.table(),
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

