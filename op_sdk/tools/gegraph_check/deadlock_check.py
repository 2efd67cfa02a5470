"""``deadlock_check``: TorchAir's check of an NPU task trace for the multi-stream deadlock
of communication kernels. A communication task with Schem Mode 1 starts only once all the AI
vector cores it asks for are free at once; two such tasks on different streams that can be
ready at the same time and together ask for more cores than the device has (``aivec_total``)
can each hold cores the other waits for.

When two tasks can be ready at once is decided by the synchronisation alone (a trace's
times are not the order the device must keep): each stream runs its tasks in Task Id order,
and a wait (``EVENT_WAIT_<h>`` / ``MEM_WAIT_VALUE_<h>``) runs after the record of the same
handle (``EVENT_RECORD_<h>`` / ``MEM_WRITE_VALUE_<h>``). Each task gets a vector clock (for
every stream, the last of its tasks that happens before this one), computed in one pass in
dependency order; two tasks are concurrent when neither clock covers the other. A wait whose
record can only run after it (a cycle of waits) never completes: that is reported as a
deadlock of its own, with the waits on the cycle.

``python -m op_sdk.tools.gegraph_check.deadlock_check trace.json [-o OUT] [--aivec-total N]
[--merge-gap G]``
"""

from __future__ import annotations

import dataclasses
import sys

from . import _trace

__all__ = ["deadlock_check", "Conflict"]

_TOOL = "deadlock_check"


@dataclasses.dataclass(frozen=True)
class Conflict:
    """Two communication tasks that can be ready at once and need more than ``aivec_total``
    AI vector cores together."""
    stream_a: str
    task_id_a: object
    name_a: str
    aivec_a: int
    stream_b: str
    task_id_b: object
    name_b: str
    aivec_b: int


def _streams(events: list) -> dict[str, list[dict]]:
    """Each stream's tasks in Task Id order (trace order among equal ids)."""
    out: dict[str, list[dict]] = {}
    for ev in events:
        if _trace.is_task(ev) and "args" in ev:
            out.setdefault(ev["tid"], []).append(ev)
    for tasks in out.values():
        tasks.sort(key=lambda ev: _trace.args_of(ev).get("Task Id", 0))
    return out


def _clocks(streams: dict[str, list[dict]]):
    """(vector clocks {(stream, position): [position per stream]}, stream index, the waits
    that never run)."""
    index = {s: i for i, s in enumerate(streams)}
    records, waits = {}, {}
    for s, tasks in streams.items():
        for pos, ev in enumerate(tasks):
            found = _trace.sync(str(ev.get("name", "")))
            if found:
                (records if found[0] == "record" else waits)[found[1]] = (s, pos)
    after = {}                                  # wait -> the record it waits for
    for handle, wait in waits.items():
        if handle in records and records[handle] != wait:
            after[wait] = records[handle]
    preds = {(s, pos): ([(s, pos - 1)] if pos else []) + ([after[(s, pos)]] if (s, pos) in after else [])
             for s, tasks in streams.items() for pos in range(len(tasks))}
    order, never = _trace.dependency_order(preds)
    clocks = {}
    for task in order:
        clock = [-1] * len(index)
        for p in preds[task]:
            clock = [max(a, b) for a, b in zip(clock, clocks[p])]
        clock[index[task[0]]] = task[1]
        clocks[task] = clock
    stuck = sorted(w for w in after if w in never)
    return clocks, index, stuck


def _concurrent(clocks, index, a, b) -> bool:
    return clocks[a][index[b[0]]] < b[1] and clocks[b][index[a[0]]] < a[1]


def deadlock_check(input_path, output_path=None, aivec_total: int = 48,
                   merge_gap: float = 0.0) -> list[Conflict]:
    """Prints the conflicting pairs (TorchAir's ``[RESULT]`` lines) and, when there are any,
    writes the trace with their tasks marked (name prefixed ``dead_lock_``, duration 49.5) to
    ``output_path`` (default: the input's name + ``_deadlock_check``); returns the pairs.
    A cycle of waits is reported, and marked, too (its waits never complete)."""
    if not isinstance(aivec_total, int) or isinstance(aivec_total, bool) or aivec_total <= 0:
        raise ValueError(f"{_TOOL}: aivec_total must be a positive int (the device's AI vector "
                         f"cores), got {aivec_total!r}")
    events = _trace.load(input_path, _TOOL)
    merged = _trace.merge_virtual_streams(events, merge_gap)
    _trace.report_merged(merged, sys.stderr)
    streams = _streams(events)
    print(f"[INFO] Streams found: {sorted(streams, key=str)}", file=sys.stderr)
    clocks, index, stuck = _clocks(streams)
    print(f"[INFO] Checking for AIVEC deadlocks (total={aivec_total}) ...", file=sys.stderr)
    candidates = {s: [(pos, ev, _trace.aivec(ev)) for pos, ev in enumerate(tasks)
                      if _trace.args_of(ev).get("Schem Mode") == 1 and _trace.is_communication(ev)
                      and _trace.aivec(ev) > 0 and (s, pos) in clocks]
                  for s, tasks in streams.items()}
    names = list(streams)
    conflicts, marked = [], []
    for i, sa in enumerate(names):
        for sb in names[i + 1:]:
            for pa, ea, ca in candidates[sa]:
                for pb, eb, cb in candidates[sb]:
                    if ca + cb > aivec_total and _concurrent(clocks, index, (sa, pa), (sb, pb)):
                        conflicts.append(Conflict(
                            sa, _trace.args_of(ea).get("Task Id"), ea["name"], ca,
                            sb, _trace.args_of(eb).get("Task Id"), eb["name"], cb))
                        marked += [ea, eb]
    if stuck:
        print(f"\n[RESULT] Deadlock detected! {len(stuck)} wait(s) can never complete: each "
              f"waits for a record that runs only after it (a cycle of waits):")
        for s, pos in stuck:
            ev = streams[s][pos]
            print(f"  - [{s} TaskId={_trace.args_of(ev).get('Task Id')}] {ev['name']}")
            marked.append(ev)
    if not conflicts and not stuck:
        print("[RESULT] No deadlock risks detected.")
        return conflicts
    if conflicts:
        print(f"\n[RESULT] Deadlock risk detected! {len(conflicts)} conflicting pair(s):\n")
        for c in conflicts:
            print(f"  CONFLICT: [{c.stream_a} TaskId={c.task_id_a}] {c.name_a} ({c.aivec_a} AIVEC)"
                  f"  <->  [{c.stream_b} TaskId={c.task_id_b}] {c.name_b} ({c.aivec_b} AIVEC)"
                  f"  sum={c.aivec_a + c.aivec_b} > {aivec_total}")
        tasks: dict = {}
        for c in conflicts:
            tasks.setdefault((c.stream_a, c.task_id_a), c.name_a)
            tasks.setdefault((c.stream_b, c.task_id_b), c.name_b)
        print(f"\n[RESULT] Deadlock task list ({len(tasks)} tasks):")
        for (s, task_id), name in tasks.items():
            print(f"  - [{s} TaskId={task_id}] {name}")
    keys = {(ev["tid"], _trace.args_of(ev).get("Task Id")) for ev in marked}
    out = []
    for ev in events:
        if _trace.is_task(ev) and (ev["tid"], _trace.args_of(ev).get("Task Id")) in keys:
            ev = dict(ev, dur=49.5)
            if not str(ev.get("name", "")).startswith("dead_lock_"):
                ev["name"] = "dead_lock_" + str(ev.get("name", ""))
        out.append(ev)
    output_path = output_path or _trace.default_output(input_path, "_deadlock_check")
    _trace.save(out, output_path)
    print(f"\n[INFO] Output written to {output_path}", file=sys.stderr)
    return conflicts


def main(argv=None) -> None:
    parser = _trace.command_line("Detect AIVEC deadlock risks in an NPU task trace (Chrome "
                                 "tracing JSON).",
                                 "output path (written when risks are found)",
                                 "the trace (raw, filtered or aligned)")
    parser.add_argument("--aivec-total", type=int, default=48,
                        help="AI vector cores of the device (default 48)")
    args = parser.parse_args(argv)
    deadlock_check(args.input, args.output, args.aivec_total, args.merge_gap)


if __name__ == "__main__":
    main()
