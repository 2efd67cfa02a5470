"""``filter_comm_ops``: TorchAir's trace filter. Keeps, of an NPU task trace (after merging
its virtual streams), the synchronisation tasks (records: ``EVENT_RECORD_*``,
``MEM_WRITE_VALUE_*``; waits: ``EVENT_WAIT_*``, ``MEM_WAIT_VALUE_*``) and the communication
tasks, so that a trace of tens of thousands of tasks opens in chrome://tracing; warns of a
communication task whose Schem Mode is not 1 (only Schem Mode 1 waits for all its cores at
once, the precondition of the deadlock ``deadlock_check`` looks for).

``python -m op_sdk.tools.gegraph_check.filter_operators trace.json [-o OUT] [--merge-gap G]``
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict

from . import _trace

__all__ = ["filter_comm_ops"]

_TOOL = "filter_comm_ops"


def _kind(event: dict):
    name = str(event.get("name", ""))
    found = _trace.sync(name)
    if found:
        return "control_" + found[0]
    return "communication" if _trace.is_communication(event) else None


def filter_comm_ops(input_path, output_path=None, merge_gap: float = 0.0) -> str:
    """Writes the filtered trace to ``output_path`` (default: the input's name with
    ``_filtered`` before its extension) and returns that path."""
    events = _trace.load(input_path, _TOOL)
    _trace.report_merged(_trace.merge_virtual_streams(events, merge_gap), sys.stdout)
    print(f"tasks in the trace: {len(events)}")
    kept, counts, per_stream = [], Counter(), defaultdict(Counter)
    for event in events:
        kind = _kind(event)
        if kind is None:
            counts["dropped"] += 1
            continue
        kept.append(event)
        counts[kind] += 1
        per_stream[event.get("tid", "unknown")][kind] += 1
        mode = _trace.args_of(event).get("Schem Mode")
        if kind == "communication" and mode != 1:
            print(f"  [warning] communication task with Schem Mode != 1: {event.get('tid')} "
                  f"Task={_trace.args_of(event).get('Task Id', '?')} name=\"{event.get('name')}\" "
                  f"Schem Mode={mode}")
    print(f"kept: {len(kept)} (records {counts['control_record']}, waits "
          f"{counts['control_wait']}, communication {counts['communication']}); dropped: "
          f"{counts['dropped']}")
    for stream in sorted(per_stream, key=str):
        c = per_stream[stream]
        print(f"  {stream}: records {c['control_record']}, waits {c['control_wait']}, "
              f"communication {c['communication']}")
    output_path = output_path or _trace.default_output(input_path, "_filtered")
    _trace.save(kept, output_path)
    print(f"filtered trace written to {output_path}")
    return output_path


def main(argv=None) -> None:
    args = _trace.command_line("Keep the synchronisation and communication tasks of an NPU "
                               "task trace (Chrome tracing JSON).",
                               "output path (default: the input's name + _filtered)"
                               ).parse_args(argv)
    filter_comm_ops(args.input, args.output, args.merge_gap)


if __name__ == "__main__":
    main()
