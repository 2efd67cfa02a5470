"""The differential fuzz campaign (tests/fuzz/campaign.py) with a fixed seed within a time
budget (OP_SDK_FUZZ_SECONDS, default 60 s; OP_SDK_FUZZ_SEED, default 20261126): no
finding. A longer run for a release: `python -m tests.fuzz --seed S --calls 50000`
(docs/testing.md)."""

import os
import platform
import subprocess
import sys

import pytest

from tests.fuzz import campaign

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_fuzz_campaign_finds_nothing():
    seed = int(os.environ.get("OP_SDK_FUZZ_SEED", "20261126"))
    seconds = float(os.environ.get("OP_SDK_FUZZ_SECONDS", "60"))
    s = campaign.run(seed, seconds=seconds)
    # every operator was called, and most calls ran both ways
    assert set(s.per_op) == {d.name for d in campaign.sdk_ops()}, s.per_op
    assert s.ran > s.calls // 3, s.line()
    shown = "\n".join(f"[{f.kind}] {f.op}: {f.detail}\n    {f.op}({f.call})"
                      for f in s.findings[:20])
    assert not s.findings, f"{s.line()}\n{shown}"


@pytest.mark.parametrize("isa", ["avx2", "generic"])
def test_fuzz_campaign_on_the_other_instruction_sets(isa):
    """The same campaign (another seed, a third of the budget) with the native kernels on
    the AVX2 and the portable C++ paths (OP_SDK_CPU_ISA, chosen once per process)."""
    if platform.machine().lower() not in ("x86_64", "amd64") and isa != "generic":
        pytest.skip("x86-64 only")
    seconds = float(os.environ.get("OP_SDK_FUZZ_SECONDS", "60")) / 3
    result = subprocess.run(
        [sys.executable, "-m", "tests.fuzz", "--seed", "7", "--seconds", str(seconds)],
        cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT, OP_SDK_CPU_ISA=isa),
        capture_output=True, text=True, timeout=seconds + 300, check=False)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " 0 findings" in result.stdout, result.stdout[-2000:]


def test_fuzz_harness_catches_a_wrong_kernel():
    """The comparison is not vacuous: a reference that is off by one step in one element,
    a NaN lost, and a fake with other strides are each reported."""
    import torch

    s = campaign.Summary(0)
    a = torch.tensor([1, 2, 3], dtype=torch.int8)
    assert campaign.compare("npu_dynamic_quant", a, a.clone(), False) is None
    assert campaign.compare("npu_dynamic_quant", a, torch.tensor([1, 2, 4], dtype=torch.int8),
                            False)
    f = torch.tensor([1.0, float("nan")])
    assert campaign.compare("npu_rms_norm", f, torch.tensor([1.0, 0.0]), False)
    assert campaign.compare("npu_rms_norm", f, torch.tensor([1.0, float("nan")]), False) is None

    class Wrong:
        name, slice, functional = "npu_rms_norm", "rms_norm", None
        mutated_args = []

        @staticmethod
        def op(x, gamma):
            return x.t().contiguous().t() * gamma, x[..., :1]

        @staticmethod
        def reference(x, gamma):
            return x * gamma + 1e-3, x[..., :1]

    x = torch.randn(4, 8)
    campaign.check_call(Wrong, (x, torch.ones(8)), {}, s)
    assert [f.kind for f in s.findings] == ["mismatch"], s.findings
