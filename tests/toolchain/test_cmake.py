"""CMakeLists.txt builds the same extension as setup.py, and that build works: loaded in a
fresh process as op_sdk._C, its kernels register and agree with the references."""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = r"""
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("op_sdk._C", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
sys.modules["op_sdk._C"] = module        # op_sdk loads this build instead of its own
import op_sdk
from op_sdk import _native
assert _native.load() and _native._STATE["module"] is module
opdef = op_sdk.get_op("npu_add_rms_norm_dynamic_quant")
assert opdef.kernel_devices()["cpu"] == "native" and not opdef.native_errors, opdef.kernel_devices()
x1, x2 = torch.randn(5, 40, dtype=torch.bfloat16), torch.randn(5, 40, dtype=torch.bfloat16)
g = torch.rand(40, dtype=torch.bfloat16)
got = torch.ops.npu.npu_add_rms_norm_dynamic_quant(x1, x2, g)
want = opdef.reference(x1, x2, g)
for a, b in zip(got, want):
    if a is not None:
        assert torch.equal(a, b) if a.dtype == torch.int8 else torch.allclose(a.float(), b.float()), (a, b)
print("ok", module.cpu_isa()["isa"])
"""


def test_cmake_builds_the_extension(tmp_path, require_tool):
    cmake = require_tool("cmake")
    build = str(tmp_path / "cmake")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    for cmd in ([cmake, "-S", ROOT, "-B", build, f"-DPython3_EXECUTABLE={sys.executable}", *generator],
                [cmake, "--build", build, "-j", str(os.cpu_count() or 2)]):
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=1200, check=False)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    [library] = glob.glob(os.path.join(build, "_C*.so"))
    result = subprocess.run([sys.executable, "-c", _SCRIPT, library], cwd=ROOT, capture_output=True,
                            text=True, timeout=300, check=False,
                            env=dict(os.environ, PYTHONPATH=ROOT))
    assert result.returncode == 0 and result.stdout.startswith("ok"), result.stderr[-3000:]
