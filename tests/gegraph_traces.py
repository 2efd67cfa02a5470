"""NPU task traces for the gegraph_check tests: Chrome-tracing events as Ascend's profiler
writes an ACL graph's tasks (one "X" event per task on ``stream<N>``), built per stream."""

from __future__ import annotations

import json
import random


def task(name, kind="KERNEL_AICORE", blocks=0, mode=0, dur=9.5, **args):
    return {"name": name, "kind": kind, "blocks": blocks, "mode": mode, "dur": dur, "args": args}


def record(h):
    return task(f"EVENT_RECORD_{h}", "EVENT_RECORD", dur=4.5)


def wait(h):
    return task(f"EVENT_WAIT_{h}", "EVENT_WAIT", dur=4.5)


def trace(streams: dict[int, list[dict]], pid=1) -> list[dict]:
    """Events of ``{stream number: [task, ...]}``: Task Ids and times in stream order, the
    streams' times interleaved (as a device's clock would give them)."""
    events = []
    for number, tasks in streams.items():
        ts = 1000.0 + number
        for task_id, t in enumerate(tasks):
            args = {"Task Id": task_id, "Stream Id": number, "Task Type": t["kind"],
                    "Numblocks": t["blocks"], "Schem Mode": t["mode"], **t["args"]}
            events.append({"name": t["name"], "ph": "X", "pid": pid, "tid": f"stream{number}",
                           "ts": ts, "dur": t["dur"], "args": args})
            ts += t["dur"] + 3.0
    return events


def write(tmp_path, name, events) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(events))
    return str(path)


def deadlocking():
    """A coordinator (stream 315) releases streams 313 and 310 back to back and waits for
    313 only later: the all-gather (48 AIVEC) on 310 and the MoE dispatch / combine (16 each)
    on 313 can be ready together, 64 > 48."""
    return trace({
        315: [task("MatMul_0")] * 7 + [record(101), record(102)] + [task("Add")] * 13 + [wait(201)],
        313: [wait(101), task("MoeDistributeDispatchV2_e3e2549baf4795bf56c350e970d2218a_1060",
                              "KERNEL_MIX_AIV", 16, 1),
              task("Mul"), task("MoeDistributeCombineV2_37d3570b1cb4463a4348af4b433cf23c_32",
                                "KERNEL_MIX_AIV", 16, 1), record(201)],
        310: [wait(102), task("aiv_all_gather_bfloat16_t", "KERNEL_AIVEC", 48, 1)],
    })


def serialised():
    """The coordinator (stream 355) releases 311 only after 312 has finished its all-gather:
    the two communication tasks never overlap."""
    return trace({
        355: [record(1), wait(2), record(3), wait(4)],
        312: [wait(1), task("aiv_all_gather_bfloat16_t", "KERNEL_AIVEC", 48, 1), record(2)],
        311: [wait(3), task("MoeDistributeDispatchV2_abcdef1234567", "KERNEL_MIX_AIV", 24, 1),
              record(4)],
    })


def random_acyclic(seed: int, streams=4, tasks=12) -> list[dict]:
    """Random streams whose waits follow a global issue order (so no cycle): each record is
    waited for by one later task of another stream."""
    rng = random.Random(seed)
    names = list(range(300, 300 + streams))
    plan: dict[int, list[dict]] = {n: [] for n in names}
    pending: list[tuple[int, int]] = []
    handle = 1000
    for _ in range(streams * tasks):
        s = rng.choice(names)
        roll = rng.random()
        owed = [p for p in pending if p[1] != s]
        if owed and roll < 0.25:
            h, _ = owed[0]
            pending.remove(owed[0])
            plan[s].append(wait(h))
        elif roll < 0.45:
            handle += 1
            plan[s].append(record(handle))
            pending.append((handle, s))
        elif roll < 0.7:
            kind = rng.choice(["KERNEL_AIVEC", "KERNEL_MIX_AIV", "KERNEL_MIX_AIC"])
            plan[s].append(task(rng.choice(["aiv_all_to_all_v_bfloat16_t",
                                            "MoeDistributeCombineV2_9f8e7d6c5b4a3210",
                                            "hccl_aiv_sync"]),
                                kind, rng.choice([8, 16, 24, 32, 48]), 1,
                                dur=rng.choice([9.5, 2.0, 30.0]),
                                **({"Task Ration": rng.choice([0, 1, 2])}
                                   if kind == "KERNEL_MIX_AIC" else {})))
        else:
            plan[s].append(task(rng.choice(["MatMul_abcdef123456", "Add", "Cast"]),
                                dur=rng.choice([1.0, 9.5, 20.0])))
    return trace(plan)
