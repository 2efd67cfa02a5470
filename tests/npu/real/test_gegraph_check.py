"""op_sdk's gegraph_check tools against TorchAir's own (torch_npu's bundled TorchAir,
tools/gegraph_check, loaded from their files: they use the standard library only) on the
same traces: the deadlock check's result lines and marked trace, the filtered trace and the
aligned trace are the same."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from op_sdk.tools.gegraph_check.align_trace import align_trace_json
from op_sdk.tools.gegraph_check.deadlock_check import deadlock_check
from op_sdk.tools.gegraph_check.filter_operators import filter_comm_ops
from tests.gegraph_traces import deadlocking, random_acyclic, record, serialised, task, trace, wait, write

_DIR = os.path.join(os.environ.get("OP_SDK_TORCH_NPU_SITE", ""), "torch_npu", "dynamo",
                    "torchair", "tools", "gegraph_check")


def _theirs(name):
    spec = importlib.util.spec_from_file_location(f"torchair_gegraph_{name}",
                                                  os.path.join(_DIR, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _chain():
    comm = lambda n: task(f"aiv_{n}", "KERNEL_AIVEC", 40, 1)  # noqa: E731
    return trace({1: [record(1), comm("t1"), wait(3)], 2: [wait(1), comm("t2"), record(2)],
                  3: [wait(2), comm("t3"), record(3)]})


TRACES = {"deadlocking": deadlocking, "serialised": serialised, "chain": _chain,
          **{f"random{s}": (lambda s=s: random_acyclic(s)) for s in range(8)}}


def _result_lines(text):
    return [line for line in text.splitlines() if line.startswith(("[RESULT]", "  CONFLICT", "  - ["))]


@pytest.mark.parametrize("name", list(TRACES))
def test_deadlock_check_agrees(tmp_path, capsys, name):
    events = TRACES[name]()
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    mine.mkdir()
    theirs.mkdir()
    deadlock_check(write(mine, "g.json", events), None, 48)
    ours = capsys.readouterr().out
    _theirs("deadlock_check").deadlock_check(write(theirs, "g.json", events), None, 48)
    reference = capsys.readouterr().out
    assert _result_lines(ours) == _result_lines(reference)
    assert os.path.exists(mine / "g_deadlock_check.json") == os.path.exists(
        theirs / "g_deadlock_check.json")
    if os.path.exists(theirs / "g_deadlock_check.json"):
        assert json.load(open(mine / "g_deadlock_check.json")) == json.load(
            open(theirs / "g_deadlock_check.json"))


@pytest.mark.parametrize("name", list(TRACES))
def test_filter_agrees(tmp_path, name):
    events = TRACES[name]()
    ours = filter_comm_ops(write(tmp_path, "mine.json", events), None)
    reference = _theirs("filter_operators").filter_comm_ops(write(tmp_path, "theirs.json", events), None)
    assert json.load(open(ours)) == json.load(open(reference))


@pytest.mark.parametrize("name", list(TRACES))
def test_align_agrees(tmp_path, name):
    events = TRACES[name]()
    ours = align_trace_json(write(tmp_path, "mine.json", events), None)
    _theirs("align_trace").align_trace_json(write(tmp_path, "theirs.json", events), None)
    a, b = json.load(open(ours)), json.load(open(tmp_path / "theirs.aligned.json"))
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys() and x["name"] == y["name"] and x.get("tid") == y.get("tid")
        assert x["ts"] == pytest.approx(y["ts"]) and x.get("dur") == pytest.approx(y.get("dur"))
