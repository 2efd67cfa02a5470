"""The real torch_npu wheel beside op_sdk (marker ``torch_npu_real``): prepares the stubbed
environment (tests/npu/torch_npu_env.py; downloads the wheel once) and runs
tests/npu/real in a subprocess inside it, where torch_npu is imported for real."""

import os
import subprocess
import sys

import pytest

from tests.npu.torch_npu_env import prepare

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.torch_npu_real


@pytest.fixture(scope="session")
def torch_npu_env():
    env, why = prepare()
    if env is None:
        pytest.skip(why)
    return env


def test_real_torch_npu_suite(torch_npu_env):
    from tests.npu.ge_schema import prepare_protobuf

    protobuf, why = prepare_protobuf()  # the GE schema's runtime (converter tests)
    if protobuf is None:
        pytest.skip(why)
    environ = torch_npu_env.environ([ROOT, protobuf])
    environ.update(OP_SDK_TORCH_NPU_REAL="1", OP_SDK_TORCH_NPU_SITE=torch_npu_env.site,
                   PYTHONWARNINGS="ignore::DeprecationWarning")
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-o", "addopts=", os.path.join(ROOT, "tests", "npu", "real")],
                         capture_output=True, text=True, env=environ, cwd=ROOT, timeout=1500)
    print(out.stdout[-6000:])
    assert out.returncode == 0, out.stdout[-12000:] + out.stderr[-4000:]
    assert " passed" in out.stdout and " failed" not in out.stdout
