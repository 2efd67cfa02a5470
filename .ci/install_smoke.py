"""Checks one installed copy of op_sdk, from a directory outside the source tree:
python .ci/install_smoke.py MODE SOURCE_TREE, MODE being editable, installed, wheel or
sdist.

The package imports from where MODE puts it (the source tree only when editable), its
native kernels load and are registered for every operator that declares one, a native
kernel agrees with the reference, the kernel headers are there, and the op-sdk command
runs."""

import importlib.resources
import os
import subprocess
import sys

import torch

mode, source = sys.argv[1], os.path.realpath(sys.argv[2])
assert not os.path.realpath(os.getcwd()).startswith(source), "run this outside the source tree"

import op_sdk  # noqa: E402
from op_sdk import _native  # noqa: E402

where = os.path.realpath(op_sdk.__file__)
from_source = where.startswith(source + os.sep)
assert from_source == (mode == "editable"), f"{mode}: op_sdk imported from {where}"
assert _native.load(), f"{mode}: op_sdk._C did not load: {_native.load_error()}"
native = [d for d in op_sdk.registered_ops() if "cpu" in d.native]
assert native, "no operator declares a native CPU kernel"
for opdef in native:
    assert opdef.kernel_devices()["cpu"] == "native", (opdef.name, opdef.kernel_devices(), opdef.native_errors)

x = torch.randn(6, 40, dtype=torch.bfloat16)
g = torch.rand(40, dtype=torch.bfloat16)
got = torch.ops.npu.npu_rms_norm(x, g)
want = op_sdk.get_op("npu_rms_norm").reference(x, g)
torch.testing.assert_close(got[0].float(), want[0].float(), rtol=1e-2, atol=1e-2)

headers = op_sdk.include_dirs()
assert all(os.path.isfile(os.path.join(headers[0], h)) for h in ("simd.h", "isa_expand.h", "quant.inl")), headers
assert os.path.isfile(os.path.join(headers[1], "checks.h")), headers
assert from_source == headers[0].startswith(source + os.sep), headers
from op_sdk.app.deliverables import ascendc_root  # noqa: E402

ascendc = ascendc_root()
assert ascendc and os.path.isfile(os.path.join(ascendc, "model", "kernel_operator.h")), ascendc

templates = importlib.resources.files("op_sdk.app") / "templates"
assert (templates / "report.html.j2").is_file() and (templates / "report.md.j2").is_file(), templates

version = subprocess.run(["op-sdk", "--version"], capture_output=True, text=True, check=True).stdout
assert version.startswith(f"op-sdk {op_sdk.__version__} "), version
ops = subprocess.run(["op-sdk", "ops"], capture_output=True, text=True, check=True).stdout
assert "npu::npu_rms_norm" in ops and "native CPU kernels missing" not in ops, ops
print(f"{mode}: ok ({len(native)} native operators, {op_sdk._C.cpu_isa()['isa']} kernels) from {where}")
