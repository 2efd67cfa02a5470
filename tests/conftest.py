"""Markers of the suite (select with -m, e.g. `pytest -m torch_npu_real tests`), and the
per-area summary printed after a run."""

import collections
import os

import torch

# Without a CUDA device the Triton kernels' tests (tests/triton) run under Triton's
# interpreter, which must be chosen before Triton is first imported: Triton's own library
# functions (tl.sum, ...) are compiled or interpreted by the mode of that first import, and
# other tests import Triton early (through torch._inductor).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "torch_npu_real: runs checks inside an environment with the real torch_npu "
        "wheel and no-op CANN stub libraries (tests/npu/torch_npu_env.py)")
    config.addinivalue_line(
        "markers", "triton: a Triton kernel's test (tests/triton): natively on a CUDA device, "
        "else under Triton's interpreter on CPU")


def _area(nodeid: str) -> str:
    """tests/<folder> for a test in a folder, else its file."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else path


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Per area of the suite: tests passed / failed / skipped and the seconds they took,
    slowest first (with --durations=N pytest also lists the N slowest tests)."""
    areas = collections.defaultdict(collections.Counter)
    seconds = collections.Counter()
    for key, reports in terminalreporter.stats.items():
        for rep in reports:
            nodeid = getattr(rep, "nodeid", "")
            if not nodeid or not hasattr(rep, "duration"):
                continue
            area = _area(nodeid)
            seconds[area] += rep.duration  # setup, call and teardown
            if key:  # "": the setup / teardown of a passing test
                areas[area][key] += 1
    if not areas:
        return
    terminalreporter.section("time per area of the suite")
    for area, secs in seconds.most_common():
        counts = ", ".join(f"{n} {k}" for k, n in sorted(areas[area].items()))
        terminalreporter.write_line(f"{secs:8.1f} s  {area:<48} {counts}")
