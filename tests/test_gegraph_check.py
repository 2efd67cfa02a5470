"""TorchAir's gegraph_check tools (op_sdk.tools.gegraph_check) on NPU task traces: the
deadlock check's verdicts (vector clocks through chains of streams, Schem Mode, the core
counts of each kernel type, virtual streams, cycles of waits), the filter's selection and the
aligned layout's rules, the output files' names, and the errors. tests/npu/real compares
them with TorchAir's own tools."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from op_sdk.tools.gegraph_check import _trace
from op_sdk.tools.gegraph_check.align_trace import align_trace_json
from op_sdk.tools.gegraph_check.deadlock_check import deadlock_check
from op_sdk.tools.gegraph_check.filter_operators import filter_comm_ops
from tests.gegraph_traces import deadlocking, random_acyclic, record, serialised, task, trace, wait, write


def _pairs(conflicts):
    return sorted((c.name_a, c.name_b) for c in conflicts)


def test_deadlock_found_and_marked(tmp_path, capsys):
    path = write(tmp_path, "graph_2.json", deadlocking())
    conflicts = deadlock_check(path, None, aivec_total=48)
    assert _pairs(conflicts) == [
        ("MoeDistributeCombineV2_37d3570b1cb4463a4348af4b433cf23c_32", "aiv_all_gather_bfloat16_t"),
        ("MoeDistributeDispatchV2_e3e2549baf4795bf56c350e970d2218a_1060", "aiv_all_gather_bfloat16_t")]
    out = capsys.readouterr().out
    assert "[RESULT] Deadlock risk detected! 2 conflicting pair(s):" in out
    assert "(48 AIVEC)" in out and "(16 AIVEC)" in out and "sum=64 > 48" in out
    marked = json.load(open(tmp_path / "graph_2_deadlock_check.json"))
    dead = sorted(e["name"] for e in marked if e["name"].startswith("dead_lock_"))
    assert len(dead) == 3 and all(e["dur"] == 49.5 for e in marked
                                  if e["name"].startswith("dead_lock_"))
    assert len(marked) == len(deadlocking())


def test_enough_cores_or_ordered_streams_mean_no_risk(tmp_path, capsys):
    path = write(tmp_path, "graph_2.json", deadlocking())
    assert deadlock_check(path, None, aivec_total=64) == []          # 64 is not > 64
    assert "[RESULT] No deadlock risks detected." in capsys.readouterr().out
    assert not (tmp_path / "graph_2_deadlock_check.json").exists()
    path = write(tmp_path, "graph_1.json", serialised())
    assert deadlock_check(path, None, aivec_total=48) == []


def test_happens_before_through_a_chain_of_streams(tmp_path):
    """stream1 releases stream2, stream2 releases stream3, stream3 replies to stream1: T1
    (stream1, after its record) is concurrent with T2 and T3; T3 runs after T2."""
    comm = lambda n: task(f"aiv_{n}", "KERNEL_AIVEC", 40, 1)  # noqa: E731
    events = trace({1: [record(1), comm("t1"), wait(3)],
                    2: [wait(1), comm("t2"), record(2)],
                    3: [wait(2), comm("t3"), record(3)]})
    conflicts = deadlock_check(write(tmp_path, "chain.json", events), None, aivec_total=48)
    assert _pairs(conflicts) == [("aiv_t1", "aiv_t2"), ("aiv_t1", "aiv_t3")]


def test_what_counts(tmp_path):
    """Only Schem Mode 1 communication tasks count; KERNEL_MIX_AIC holds 2 x Numblocks unless
    its Task Ration is 0; KERNEL_AICORE holds no vector core; ExtendInfo's taskType counts."""
    def check(a, b):
        events = trace({1: [a], 2: [b]})
        return len(deadlock_check(write(tmp_path, "t.json", events), None, aivec_total=48))
    big = task("aiv_all_reduce", "KERNEL_AIVEC", 40, 1)
    assert check(big, task("aiv_x", "KERNEL_AIVEC", 16, 1)) == 1
    assert check(big, task("aiv_x", "KERNEL_AIVEC", 16, 0)) == 0          # Schem Mode 0
    assert check(big, task("MatMul", "KERNEL_AIVEC", 16, 1)) == 0         # not communication
    assert check(big, task("Kernel", "KERNEL_AIVEC", 16, 1,
                           ExtendInfo=json.dumps({"taskType": "communication"}))) == 1
    assert check(big, task("hccl_aiv_sync", "KERNEL_MIX_AIC", 5, 1, **{"Task Ration": 1})) == 1
    assert check(big, task("hccl_aiv_sync", "KERNEL_MIX_AIC", 16, 1, **{"Task Ration": 0})) == 0
    assert check(big, task("combine", "KERNEL_AICORE", 48, 1)) == 0
    assert check(big, task("dispatch", "KERNEL_MIX_AIV", 9, 1)) == 1
    assert _trace.aivec({"args": {"Task Type": "KERNEL_MIX_AIC", "Numblocks": 5}}) == 10


def test_a_cycle_of_waits_is_a_deadlock(tmp_path, capsys):
    events = trace({1: [wait(2), task("Add"), record(1)], 2: [wait(1), record(2)]})
    path = write(tmp_path, "cycle.json", events)
    assert deadlock_check(path, None, aivec_total=48) == []
    out = capsys.readouterr().out
    assert "2 wait(s) can never complete" in out and "EVENT_WAIT_1" in out
    marked = json.load(open(tmp_path / "cycle_deadlock_check.json"))
    assert sorted(e["name"] for e in marked if e["name"].startswith("dead_lock_")) == [
        "dead_lock_EVENT_WAIT_1", "dead_lock_EVENT_WAIT_2"]
    with pytest.raises(ValueError, match="align_trace_json: the trace's waits form a cycle"):
        align_trace_json(path, str(tmp_path / "a.json"))


def test_virtual_streams_are_merged_first(tmp_path, capsys):
    """Stream 9's tasks run on stream 1's queue (STREAM_ACTIVE): after 1's all-reduce,
    so they cannot overlap it; left as a stream of their own they would."""
    events = trace({1: [task("aiv_all_reduce", "KERNEL_AIVEC", 40, 1),
                        task("STREAM_ACTIVE", "STREAM_ACTIVE", **{"Active Stream Id": 9})],
                    9: [task("aiv_all_to_all", "KERNEL_AIVEC", 40, 1)]})
    for e in events:                                    # stream 9's Task Ids come after 1's
        if e["tid"] == "stream9":
            e["args"]["Task Id"] = 5
    path = write(tmp_path, "v.json", events)
    assert deadlock_check(path, None, aivec_total=48) == []
    assert "Merged stream: stream9 -> stream1" in capsys.readouterr().err
    merged = json.loads(json.dumps(events))
    assert _trace.merge_virtual_streams(merged) == [("stream9", "stream1")]
    moved = next(e for e in merged if e["name"] == "aiv_all_to_all")
    assert moved["tid"] == "stream1" and moved["args"]["Stream Id"] == 1
    host_end = max(e["ts"] + e["dur"] for e in merged if e["name"] != "aiv_all_to_all")
    assert moved["ts"] == host_end


@pytest.mark.parametrize("seed", range(6))
def test_clocks_agree_with_reachability(tmp_path, seed):
    """On random acyclic traces every reported pair is unordered in the dependency graph
    (breadth-first reachability), and every unordered over-budget pair (each task holding
    vector cores) is reported."""
    events = random_acyclic(seed)
    reported = {(c.stream_a, c.task_id_a, c.stream_b, c.task_id_b)
                for c in deadlock_check(write(tmp_path, "r.json", events), None, aivec_total=48)}
    tasks = {}
    for e in events:
        tasks.setdefault(e["tid"], []).append(e)
    edges = {}
    records = {e["name"][13:]: (e["tid"], e["args"]["Task Id"]) for e in events
               if e["name"].startswith("EVENT_RECORD_")}
    for s, ts in tasks.items():
        for e in ts:
            node = (s, e["args"]["Task Id"])
            preds = [(s, e["args"]["Task Id"] - 1)] if e["args"]["Task Id"] else []
            if e["name"].startswith("EVENT_WAIT_"):
                preds.append(records[e["name"][11:]])
            for p in preds:
                edges.setdefault(p, []).append(node)

    def reaches(a, b):
        seen, todo = {a}, [a]
        while todo:
            for n in edges.get(todo.pop(), ()):
                if n == b:
                    return True
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return False

    expected = set()
    comm = [e for e in events if e["args"]["Schem Mode"] == 1]
    order = sorted(tasks)
    for a in comm:
        for b in comm:
            if order.index(a["tid"]) >= order.index(b["tid"]):
                continue
            if min(_trace.aivec(a), _trace.aivec(b)) == 0 or _trace.aivec(a) + _trace.aivec(b) <= 48:
                continue
            na, nb = (a["tid"], a["args"]["Task Id"]), (b["tid"], b["args"]["Task Id"])
            if not reaches(na, nb) and not reaches(nb, na):
                expected.add((*na, *nb))
    assert {(sa, ia, sb, ib) if order.index(sa) < order.index(sb) else (sb, ib, sa, ia)
            for sa, ia, sb, ib in reported} == expected


def test_filter_keeps_sync_and_communication(tmp_path, capsys):
    events = deadlocking() + [task_event for task_event in trace(
        {5: [task("aiv_all_gather", "KERNEL_AIVEC", 8, 2)]})]
    path = write(tmp_path, "graph_2.json", events)
    out_path = filter_comm_ops(path, None)
    assert out_path == str(tmp_path / "graph_2_filtered.json")
    kept = json.load(open(out_path))
    assert sorted(e["name"] for e in kept) == sorted(
        [e["name"] for e in events if e["name"].startswith(("EVENT_", "aiv_", "Moe"))])
    out = capsys.readouterr().out
    assert "communication task with Schem Mode != 1: stream5" in out
    assert filter_comm_ops(path, str(tmp_path / "x.json")) == str(tmp_path / "x.json")


def test_align_lays_streams_out_and_stretches_waits(tmp_path, capsys):
    events = deadlocking()
    path = write(tmp_path, "graph_2.json", events)
    out = align_trace_json(path, None)
    assert out == str(tmp_path / "graph_2.aligned.json") and out in capsys.readouterr().out
    aligned = json.load(open(out))
    tasks = [e for e in aligned if e["ph"] == "X"]
    by_stream = {}
    for e in tasks:
        by_stream.setdefault(e["tid"], []).append(e)
    for s, es in by_stream.items():
        es.sort(key=lambda e: e["ts"])
        assert es[0]["ts"] == 0
        for a, b in zip(es, es[1:]):
            assert b["ts"] == pytest.approx(a["ts"] + a["dur"] + 0.2)
    by_name = {e["name"]: e for e in tasks}
    for h in ("101", "102", "201"):
        r, w = by_name[f"EVENT_RECORD_{h}"], by_name[f"EVENT_WAIT_{h}"]
        assert w["ts"] + w["dur"] == pytest.approx(max(r["ts"] + r["dur"], w["ts"] + 4.5))
    assert "MoeDistributeDispatchV2_1060" in by_name                 # hash dropped
    flows = [e for e in aligned if e.get("cat") == "event_record->wait"]
    assert len(flows) == 4 * 3
    start = next(e for e in flows if e["name"] == "PAIR_101" and e["ph"] == "s")
    assert start["id"] == 101 and start["ts"] == pytest.approx(
        by_name["EVENT_RECORD_101"]["ts"] + by_name["EVENT_RECORD_101"]["dur"])


@pytest.mark.parametrize("seed", range(4))
def test_align_rules_on_random_traces(tmp_path, seed):
    events = random_acyclic(seed)
    aligned = json.load(open(align_trace_json(write(tmp_path, "r.json", events), None)))
    tasks = {e["name"]: e for e in aligned if e["ph"] == "X" and e["name"].startswith("EVENT_")}
    for name, w in tasks.items():
        if name.startswith("EVENT_WAIT_"):
            r = tasks["EVENT_RECORD_" + name[11:]]
            r_end = r["ts"] + r["dur"]
            if w["ts"] < r_end - 1e-9:
                assert w["ts"] + w["dur"] == pytest.approx(r_end)
            else:
                assert w["dur"] == 4.5


def test_errors_name_the_tool_and_the_rule(tmp_path):
    with pytest.raises(FileNotFoundError, match="deadlock_check: input trace .* does not exist"):
        deadlock_check(str(tmp_path / "missing.json"), None, 48)
    with pytest.raises(FileNotFoundError, match="filter_comm_ops"):
        filter_comm_ops(str(tmp_path / "missing.json"), None)
    (tmp_path / "obj.json").write_text('{"traceEvents": []}')
    with pytest.raises(ValueError, match="align_trace_json: .* must be a JSON list"):
        align_trace_json(str(tmp_path / "obj.json"), None)
    (tmp_path / "bad.json").write_text("[1,")
    with pytest.raises(ValueError, match="is not JSON"):
        filter_comm_ops(str(tmp_path / "bad.json"), None)
    with pytest.raises(ValueError, match="aivec_total must be a positive int"):
        deadlock_check(write(tmp_path, "g.json", serialised()), None, 0)


def test_command_lines(tmp_path):
    path = write(tmp_path, "graph_2.json", deadlocking())
    run = lambda *a: subprocess.run(  # noqa: E731
        [sys.executable, "-m", *a], capture_output=True, text=True, check=True)
    out = run("op_sdk.tools.gegraph_check.deadlock_check", path, "--aivec-total", "48").stdout
    assert "Deadlock risk detected! 2 conflicting pair(s)" in out
    run("op_sdk.tools.gegraph_check.filter_operators", path, "-o", str(tmp_path / "f.json"))
    run("op_sdk.tools.gegraph_check.align_trace", str(tmp_path / "f.json"))
    assert (tmp_path / "f.aligned.json").exists()
