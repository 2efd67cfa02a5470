"""Chrome traces of compiled calls, with every thread: the CPU stream workers of a
multi-stream graph (op_sdk/compiler/streams.py) appear as threads of their own beside the
caller's, each stream's work under a ``op_sdk.stream:<name>`` range.

``write_trace(fn, path)`` profiles one call of ``fn`` (torch.profiler, CPU activity, all
threads) and writes the trace; ``thread_summary(path)`` reads one back: per thread, its
stream ranges and the busy time of its operators, and the time operators of two threads
ran at once (the overlap of the streams)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["write_trace", "thread_summary"]


def write_trace(fn: Callable[[], Any], path: str) -> Any:
    """Run ``fn()`` once under the profiler (every thread) and write a Chrome trace to
    ``path``; returns what ``fn`` returned."""
    from torch.profiler import ProfilerActivity, profile

    config = torch._C._profiler._ExperimentalConfig(profile_all_threads=True)
    with profile(activities=[ProfilerActivity.CPU], experimental_config=config) as prof:
        out = fn()
    prof.export_chrome_trace(path)
    return out


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[list[float]] = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _length(intervals) -> float:
    return sum(b - a for a, b in intervals)


def _intersect(x, y) -> list[tuple[float, float]]:
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def thread_summary(path: str) -> dict[str, Any]:
    """``{"threads": {tid: {"streams": [names], "ops": n, "busy_us": t}},
    "overlap_us": time during which operators of two or more threads ran at once}``.
    Operators are the trace's ``aten::`` / ``npu::`` ranges, outermost only."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    threads: dict[str, dict[str, Any]] = {}
    busy: dict[str, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") != "X" or "dur" not in e:
            continue
        tid, name = str(e.get("tid")), str(e.get("name", ""))
        info = threads.setdefault(tid, {"streams": [], "ops": 0, "busy_us": 0.0})
        if name.startswith("op_sdk.stream:"):
            stream = name.split(":", 1)[1]
            if stream not in info["streams"]:
                info["streams"].append(stream)
        elif "::" in name and not name.startswith("Torch-Compiled"):
            info["ops"] += 1
            busy.setdefault(tid, []).append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    for tid, spans in busy.items():
        busy[tid] = _union(spans)
        threads[tid]["busy_us"] = round(_length(busy[tid]), 1)
    overlap: list[tuple[float, float]] = []
    tids = sorted(busy)
    for i, a in enumerate(tids):
        for b in tids[i + 1:]:
            overlap.extend(_intersect(busy[a], busy[b]))
    return {"threads": {t: v for t, v in threads.items() if v["ops"] or v["streams"]},
            "overlap_us": round(_length(_union(overlap)), 1)}
