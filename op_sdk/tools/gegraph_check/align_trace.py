"""``align_trace_json``: TorchAir's trace aligner, for reading a multi-stream NPU task trace
in chrome://tracing. A trace's times are the device's, noisy, and hide which wait released
which stream; the aligned trace puts each stream's tasks end to end (0.2 apart, each keeping
its duration; ``EVENT_RESET_*`` 0.2 long) and stretches every cross-stream wait to end where
its record ends, so that a wait's block ends under its record's; each record / wait pair gets
a flow arrow (``PAIR_<handle>``) and start / end marks; task names lose their hash parts
(``MoeDistributeDispatchV2_e3e2549b..._1060`` -> ``MoeDistributeDispatchV2_1060``).

The layout is computed in one pass in dependency order (a stream's previous task and, for a
wait, its record): a wait starts after its stream's previous task and, when that is before
its record's end, ends at the record's end. A cycle of waits (a wait whose record can only
run after it) has no layout: it raises, naming the waits.

``python -m op_sdk.tools.gegraph_check.align_trace trace.json [-o OUT] [--merge-gap G]``
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from . import _trace

__all__ = ["align_trace_json"]

_TOOL = "align_trace_json"
_GAP = 0.2
_EPS = 1e-9


def _clean_name(name: str) -> str:
    """Drops the parts of ``name`` (split at ``_``) that are lowercase letters and digits
    with more than five digits: hashes."""
    parts = [p for p in name.split("_")
             if not (re.fullmatch(r"[a-z0-9]+", p) and sum(c.isdigit() for c in p) > 5)]
    return "_".join(parts) if parts else name


def _align(events: list):
    """Aligns ``events`` in place; returns (flow events, same-stream pairs, cross-stream
    pairs that needed no stretching), the pairs as (record name, wait name)."""
    for ev in events:
        if str(ev.get("name", "")).startswith("EVENT_RESET_"):
            ev["dur"] = _GAP
    streams: dict = {}
    for i, ev in enumerate(events):
        if _trace.is_task(ev):
            streams.setdefault(ev["tid"], []).append(i)
    for order in streams.values():
        order.sort(key=lambda i: (events[i].get("ts", 0), i))
    previous = {order[p]: order[p - 1] for order in streams.values() for p in range(1, len(order))}
    pairs: dict = {}
    for order in streams.values():
        for i in order:
            found = _trace.sync(str(events[i].get("name", "")))
            if found:
                pairs.setdefault(found[1], {})[found[0]] = i
    pairs = {h: (p["record"], p["wait"]) for h, p in pairs.items() if len(p) == 2}
    record_of = {w: r for r, w in pairs.values() if events[r]["tid"] != events[w]["tid"]}
    preds = {i: [p for p in (previous.get(i), record_of.get(i)) if p is not None]
             for order in streams.values() for i in order}
    layout, never = _trace.dependency_order(preds)
    for i in layout:
        ev = events[i]
        ev["dur"] = ev.get("dur", 0)
        ev["ts"] = events[previous[i]]["ts"] + events[previous[i]]["dur"] + _GAP if i in previous else 0.0
        if i in record_of:
            record = events[record_of[i]]
            end = record["ts"] + record["dur"]
            if ev["ts"] < end - _EPS:
                ev["dur"] = end - ev["ts"]
    if never:
        stuck = [events[w]["name"] for w in record_of if w in never]
        raise ValueError(f"{_TOOL}: the trace's waits form a cycle (each waits for a record "
                         f"that runs only after it), so it has no layout: {stuck}")
    same, skipped, flows = [], [], []
    for handle, (r, w) in pairs.items():
        record, wait = events[r], events[w]
        if record["tid"] == wait["tid"]:
            same.append((record["name"], wait["name"]))
        elif wait["ts"] >= record["ts"] + record["dur"] - _EPS:
            skipped.append((record["name"], wait["name"]))
        start, stop = record["ts"] + record["dur"], wait["ts"]
        flow_id = int(handle) if handle.isdigit() else len(flows)
        common = {"cat": "event_record->wait"}
        flows += [
            {"name": f"PAIR_{handle}", **common, "ph": "s", "pid": record.get("pid"),
             "tid": record["tid"], "ts": start, "id": flow_id, "bp": "e"},
            {"name": f"PAIR_{handle}", **common, "ph": "f", "pid": wait.get("pid"),
             "tid": wait["tid"], "ts": stop, "id": flow_id, "bp": "e"},
            {"name": f"PAIR_{handle}_START", **common, "ph": "i", "s": "t",
             "pid": record.get("pid"), "tid": record["tid"], "ts": start},
            {"name": f"PAIR_{handle}_END", **common, "ph": "i", "s": "t",
             "pid": wait.get("pid"), "tid": wait["tid"], "ts": stop}]
    for ev in events:
        name = ev.get("name")
        if isinstance(name, str) and not name.startswith(_trace.CONTROL_PREFIXES):
            ev["name"] = _clean_name(name)
    return flows, same, skipped


def align_trace_json(input, output=None, merge_gap: float = 0.0) -> str:
    """Writes the aligned trace to ``output`` (default: ``<input stem>.aligned.json``),
    prints and returns that path."""
    events = _trace.load(input, _TOOL)
    _trace.report_merged(_trace.merge_virtual_streams(events, merge_gap), sys.stdout)
    flows, same, skipped = _align(events)
    events.extend(flows)
    if same:
        print("Same-stream pairs (not aligned):")
        for r, w in same:
            print(f"{r} | {w}")
    if skipped:
        print("Cross-stream pairs whose wait already starts after its record ends:")
        for r, w in skipped:
            print(f"{r} | {w}")
    path = Path(input)
    out = str(output) if output else str(path.with_suffix(
        path.suffix.replace(".json", "") + ".aligned.json"))
    _trace.save(events, out)
    print(out)
    return out


def main(argv=None) -> None:
    args = _trace.command_line("Align the synchronisation tasks of an NPU task trace for "
                               "chrome://tracing.",
                               "output path (default: <input>.aligned.json)").parse_args(argv)
    align_trace_json(args.input, args.output, args.merge_gap)


if __name__ == "__main__":
    main()
