"""What the three gegraph_check tools share: reading a task trace, merging the virtual
streams into their hosts, the synchronisation task names, what a communication task is and
how many AI vector cores a task holds. One rule each, used by all three tools."""

from __future__ import annotations

import argparse
import json
import os
from collections import deque

RECORD_PREFIXES = ("EVENT_RECORD_", "MEM_WRITE_VALUE_")
WAIT_PREFIXES = ("EVENT_WAIT_", "MEM_WAIT_VALUE_")
CONTROL_PREFIXES = RECORD_PREFIXES + WAIT_PREFIXES + ("EVENT_RESET_",)


def load(path, tool: str) -> list:
    """The trace's events: a JSON list of objects (Chrome tracing's array form)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{tool}: input trace {path!r} does not exist")
    with open(path, encoding="utf-8") as f:
        try:
            events = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{tool}: input trace {path!r} is not JSON: {e}") from None
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise ValueError(f"{tool}: input trace {path!r} must be a JSON list of event objects "
                         f"(Chrome tracing's array form)")
    return events


def save(events: list, path) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(events, f, ensure_ascii=False, indent=2)


def args_of(event: dict) -> dict:
    args = event.get("args")
    return args if isinstance(args, dict) else {}


def is_task(event: dict) -> bool:
    """A task: a complete ("X") event on a stream."""
    return event.get("ph") == "X" and "tid" in event


def sync(name: str):
    """``("record" | "wait", handle)`` of a synchronisation task's name, else ``None``."""
    for kind, prefixes in (("record", RECORD_PREFIXES), ("wait", WAIT_PREFIXES)):
        for prefix in prefixes:
            if name.startswith(prefix) and len(name) > len(prefix):
                return kind, name[len(prefix):]
    return None


def is_communication(event: dict) -> bool:
    """A communication task: its name holds ``aiv_`` (the AIV collectives, ``hccl_aiv_*``
    included), ``dispatch`` or ``combine`` (the MoE dispatch / combine kernels), or its
    ``ExtendInfo`` says ``"taskType": "communication"``."""
    name = str(event.get("name", "")).lower()
    if "aiv_" in name or "dispatch" in name or "combine" in name:
        return True
    info = args_of(event).get("ExtendInfo")
    if isinstance(info, str) and info:
        try:
            info = json.loads(info)
        except json.JSONDecodeError:
            return False
    return isinstance(info, dict) and info.get("taskType") == "communication"


def aivec(event: dict) -> int:
    """The AI vector cores a task holds: Numblocks for KERNEL_AIVEC and KERNEL_MIX_AIV,
    2 x Numblocks for KERNEL_MIX_AIC unless its Task Ration is 0, none otherwise."""
    args = args_of(event)
    kind, blocks = args.get("Task Type", ""), int(args.get("Numblocks", 0) or 0)
    if kind in ("KERNEL_AIVEC", "KERNEL_MIX_AIV"):
        return blocks
    if kind == "KERNEL_MIX_AIC":
        return 0 if args.get("Task Ration", -1) == 0 else 2 * blocks
    return 0


def dependency_order(preds: dict) -> tuple[list, set]:
    """The keys of ``preds`` ({task: the tasks it runs after}) in an order where each comes
    after its predecessors, and those that never run (on a cycle of waits, or after one)."""
    users: dict = {}
    indegree = {}
    for task, before in preds.items():
        indegree[task] = len(before)
        for p in before:
            users.setdefault(p, []).append(task)
    ready = deque(t for t, n in indegree.items() if n == 0)
    order = []
    while ready:
        task = ready.popleft()
        order.append(task)
        for u in users.get(task, ()):
            indegree[u] -= 1
            if indegree[u] == 0:
                ready.append(u)
    return order, {t for t, n in indegree.items() if n > 0}


def _stream_number(tid):
    if isinstance(tid, str) and tid.startswith("stream") and tid[6:].isdigit():
        return int(tid[6:])
    return None


def merge_virtual_streams(events: list, gap: float = 0.0) -> list[tuple[str, str]]:
    """Moves the tasks of every stream a STREAM_ACTIVE task activates (a virtual stream,
    whose tasks run on the activating stream's queue) onto the activating stream, after its
    last task plus ``gap``, in place; returns the (virtual, host) pairs merged, in the order
    of the activations."""
    by_tid: dict = {}
    for ev in events:
        by_tid.setdefault(ev.get("tid"), []).append(ev)
    activations = sorted(
        (ev for ev in events
         if (args_of(ev).get("Task Type") == "STREAM_ACTIVE" or ev.get("name") == "STREAM_ACTIVE")
         and args_of(ev).get("Active Stream Id") is not None),
        key=lambda ev: ev.get("ts", 0))
    merged = []
    for ev in activations:
        source, target = f"stream{args_of(ev)['Active Stream Id']}", ev.get("tid")
        if not target or source == target or not by_tid.get(source):
            continue
        moving, staying = by_tid.pop(source), by_tid.get(target, [])
        end = max((e.get("ts", 0) + e.get("dur", 0) for e in staying), default=0)
        shift = end + gap - min(e.get("ts", 0) for e in moving)
        number = _stream_number(target)
        for e in moving:
            e["ts"] = e.get("ts", 0) + shift
            e["tid"] = target
            if number is not None and "Stream Id" in args_of(e):
                e["args"]["Stream Id"] = number
        by_tid[target] = staying + moving
        merged.append((source, target))
    return merged


def default_output(path, suffix: str) -> str:
    base, ext = os.path.splitext(os.fspath(path))
    return f"{base}{suffix}{ext}"


def report_merged(merged, out) -> None:
    for source, target in merged:
        print(f"Merged stream: {source} -> {target}", file=out)


def command_line(description: str, output_help: str,
                 input_help: str = "the trace") -> argparse.ArgumentParser:
    """The arguments all three commands take, as TorchAir's scripts take them: the input,
    ``-o / --output`` and ``--merge-gap``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("input", help=input_help)
    parser.add_argument("-o", "--output", default=None, help=output_help)
    parser.add_argument("--merge-gap", type=float, default=0.0,
                        help="gap put before a merged virtual stream's tasks (default 0.0)")
    return parser
