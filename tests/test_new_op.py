"""`op-sdk new-op`: the deliverables it writes pass their own tests as written (pytest in a
subprocess, per schema kind: one output with an optional tensor and attributes, several
outputs, an in-place schema), the files are those the issue lists, and bad names / schemas
are refused with errors naming the rule."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from op_sdk.app import new_op
from op_sdk.app.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent

KINDS = [
    ("fused_scale", "fused_scale(Tensor x, Tensor? bias=None, float alpha=1.0, int[] dims=[]) -> Tensor"),
    ("split_two", "split_two(Tensor x, int k=2) -> (Tensor a, Tensor b)"),
    ("scale_", "scale_(Tensor(a!) x, float alpha) -> Tensor(a!)"),
]


@pytest.mark.parametrize("name,schema", KINDS, ids=[k[0] for k in KINDS])
def test_generated_operator_passes_its_tests(tmp_path, name, schema, capsys):
    assert main(["new-op", name, "--schema", schema, "--namespace", f"gen_{name.strip('_')}",
                 "--out", str(tmp_path)]) == 0
    root = tmp_path / name
    base = name.rstrip("_")
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    assert {f"{name}.py", f"test_{name}.py", "ascendc/CMakeLists.txt", "ascendc/driver.cpp",
            f"ascendc/{base}/op_host/{base}_tiling.h", f"ascendc/{base}/op_host/{base}_tiling.cpp",
            f"ascendc/{base}/op_host/{base}_def.cpp", f"ascendc/{base}/op_host/{base}_infershape.cpp",
            f"ascendc/{base}/op_kernel/{base}.cpp", f"ascendc/{base}/op_graph/{base}_proto.h",
            f"npu/{base}_opplugin.cpp"} <= files
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-o", "addopts=", "-rs", str(root)], capture_output=True, text=True,
                         cwd=str(tmp_path), env={**os.environ, "PYTHONPATH": str(ROOT)},
                         timeout=900)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    # the Ascend C kernel ran on the CPU model (only the torch_npu binding may skip)
    assert "test_ascendc_kernel_matches_reference" not in out.stdout
    skipped = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("torch_npu" in line for line in skipped), skipped
    assert " passed" in out.stdout


def test_generated_prototype_matches_the_converter(tmp_path):
    """The op_graph prototype the scaffold writes is the one its GeIr declaration derives."""
    import importlib.util
    import re

    from op_sdk.converters import ir

    new_op.write("fused_scale", KINDS[0][1], str(tmp_path), namespace="gen_proto")
    spec = importlib.util.spec_from_file_location("gen_proto_fused_scale",
                                                  tmp_path / "fused_scale" / "fused_scale.py")
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    header = (tmp_path / "fused_scale" / "ascendc" / "fused_scale" / "op_graph" /
              "fused_scale_proto.h").read_text()
    proto = ir.prototype("FusedScale")
    names = re.findall(r"\.(?:OPTIONAL_INPUT|INPUT|OUTPUT|ATTR|REQUIRED_ATTR)\((\w+)", header)
    assert names == [i.name for i in proto.inputs] + list(proto.outputs) + [a.name for a in proto.attrs]
    assert "OPTIONAL_INPUT(bias" in header and ".ATTR(alpha, Float, 1.0f)" in header
    assert ".ATTR(dims, ListInt, {})" in header


@pytest.mark.parametrize("name,schema,match", [
    ("Bad", "Bad(Tensor x) -> Tensor", "lower-case identifier"),
    ("f", "f(Tensor x -> Tensor", "does not parse"),
    ("f", "g(Tensor x) -> Tensor", "names the operator 'g'"),
    ("f", "f(int k) -> Tensor", "first argument must be a Tensor"),
    ("f", "f(Tensor x) -> int", "return one or more Tensors"),
    ("f", "f(Tensor(a!) x) -> Tensor(a!)", "name ends with '_'"),
    ("f_", "f_(Tensor x, Tensor(a!) y) -> Tensor(a!)", "only the first argument"),
])
def test_refuses_bad_input(tmp_path, name, schema, match, capsys):
    assert main(["new-op", name, "--schema", schema, "--out", str(tmp_path)]) == 2
    assert match in capsys.readouterr().err


def test_refuses_to_overwrite(tmp_path, capsys):
    assert main(["new-op", "f", "--schema", "f(Tensor x) -> Tensor", "--out", str(tmp_path)]) == 0
    assert main(["new-op", "f", "--schema", "f(Tensor x) -> Tensor", "--out", str(tmp_path)]) == 2
    assert "exists and is not empty" in capsys.readouterr().err


@pytest.mark.torch_npu_real
@pytest.mark.parametrize("name,schema", KINDS, ids=[k[0] for k in KINDS])
def test_generated_binding_compiles_against_torch_npu(tmp_path, name, schema):
    """The OpPlugin binding `op-sdk new-op` writes compiles against the torch-npu wheel's
    headers (op-plugin's EXEC_NPU_CMD_EXT, TORCH_LIBRARY_IMPL for PrivateUse1)."""
    from op_sdk.app.ascendc_run import compile_binding
    from tests.npu.torch_npu_env import prepare

    env, why = prepare()
    if env is None:
        pytest.skip(why)
    new_op.write(name, schema, str(tmp_path), namespace="gen_binding")
    base = name.rstrip("_")
    source = tmp_path / name / "npu" / f"{base}_opplugin.cpp"
    compile_binding(source, env.include_dirs[0])
    broken = tmp_path / "broken.cpp"  # the check compiles for real: a misspelt macro fails
    broken.write_text(source.read_text().replace("EXEC_NPU_CMD_EXT(", "EXEC_NPU_CMD_EXTX(", 1))
    with pytest.raises(RuntimeError, match="against torch_npu failed"):
        compile_binding(broken, env.include_dirs[0])
