"""`op-sdk new-op`: one scaffold, in the layout of op_sdk's own slices.

* a user project (outside the tree): three slices of three schema kinds (one output with an
  optional tensor, a float and an int list; two outputs and keyword-only arguments, str ones
  among them; an
  in-place schema) written into one
  project, whose tests pass as written (pytest in a subprocess; only the torch_npu binding
  compile may skip);
* in the tree (``--in-tree``, on a copy of the source tree): the slice's files only (and the
  regenerated operator table), the slice's tests and the registry-wide tests pass with it,
  and deleting its files + ``op-sdk docs`` leaves the tree as it was;
* bad names / schemas are refused with errors naming the rule.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from op_sdk.app import new_op
from op_sdk.app.cli import main

ROOT = pathlib.Path(__file__).resolve().parent.parent

KINDS = [
    ("fused_scale", "fused_scale(Tensor x, Tensor? bias=None, float alpha=1.0, int[] dims=[]) -> Tensor"),
    # keyword-only arguments (torch_npu's schemas' usual form), one without a default
    ("split_two", "split_two(Tensor x, *, Tensor? w=None, int k=2, float gain, str mode=\"rint\", "
                  "str tag) -> (Tensor a, Tensor b)"),
    ("scale_", "scale_(Tensor(a!) x, float alpha) -> Tensor(a!)"),
]


def _slice_files(pkg: str, slice_: str) -> set[str]:
    return {f"{pkg}/ops/{slice_}.py", f"{pkg}/converters/{slice_}.py", f"{pkg}/onnx/{slice_}.py",
            f"csrc/npu/{slice_}.cpp", f"tests/ops/test_{slice_}.py", f"tests/ascendc/driver_{slice_}.cpp",
            f"tests/ascendc/test_{slice_}_kernel.py",
            *(f"kernels/ascendc/{slice_}/{f}" for f in (
                f"op_host/{slice_}_tiling.h", f"op_host/{slice_}_tiling.cpp", f"op_host/{slice_}_def.cpp",
                f"op_host/{slice_}_infershape.cpp", f"op_kernel/{slice_}.cpp", f"op_graph/{slice_}_proto.h"))}


def _pytest(args, cwd, env_path):
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", *args],
                          capture_output=True, text=True, cwd=str(cwd),
                          env={**os.environ, "PYTHONPATH": str(env_path)}, timeout=1800)


def test_user_project_with_three_slices_passes_its_tests(tmp_path, capsys):
    for name, schema in KINDS:
        assert main(["new-op", name, "--schema", schema, "--namespace", "gen_project",
                     "--out", str(tmp_path)]) == 0
    root = tmp_path / "gen_project"
    files = {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}
    for name, _ in KINDS:
        assert _slice_files("gen_project", name.rstrip("_")) <= files, name
    assert {"gen_project/__init__.py", "gen_project/ops/__init__.py", "tests/conftest.py"} <= files
    out = _pytest(["-o", "addopts=", "tests"], root, f"{root}{os.pathsep}{ROOT}")
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    for name, _ in KINDS:  # every slice's Ascend C kernel ran on the CPU model
        assert f"test_{name.rstrip('_')}_kernel_matches_reference" not in out.stdout
    skipped = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("torch_npu" in line for line in skipped), skipped
    assert re.search(r"\b(\d{3,}) passed", out.stdout), out.stdout[-2000:]


EXAMPLE = ROOT / "examples" / "silu_mul_quant"


def _files(root):
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_worked_example_is_a_scaffolded_project_and_passes_its_tests(tmp_path, capsys):
    """examples/silu_mul_quant, the worked example, is the project `op-sdk new-op` writes for
    its schema, filled in: the same files, no other; its tests (kernel on the CPU model
    included) pass."""
    schema = "silu_mul_quant(Tensor gate, Tensor up) -> (Tensor, Tensor)"
    assert main(["new-op", "silu_mul_quant", "--schema", schema, "--namespace", "my_ops",
                 "--out", str(tmp_path)]) == 0
    assert _files(EXAMPLE) == _files(tmp_path / "my_ops")
    out = _pytest(["-o", "addopts=", "tests"], EXAMPLE, f"{EXAMPLE}{os.pathsep}{ROOT}")
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    skipped = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert all("torch_npu" in line for line in skipped), skipped
    assert re.search(r"\b(\d{2,}) passed", out.stdout), out.stdout[-2000:]


def test_generated_prototype_header_is_the_declared_one(tmp_path):
    """The op_graph prototype the scaffold writes is the one its converter declares (read in a
    child process: importing a project defines its operators)."""
    import json

    new_op.write("fused_scale", KINDS[0][1], str(tmp_path), namespace="gen_proto")
    code = ("import json, gen_proto\n"
            "from op_sdk.converters import ir\n"
            "p = ir.prototype('FusedScale')\n"
            "print(json.dumps([i.name for i in p.inputs] + list(p.outputs) + [a.name for a in p.attrs]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "gen_proto"),
                                                                          *filter(None, sys.path)])})
    assert out.returncode == 0, out.stderr[-3000:]
    header = (tmp_path / "gen_proto" / "kernels" / "ascendc" / "fused_scale" / "op_graph" /
              "fused_scale_proto.h").read_text()
    names = re.findall(r"\.(?:OPTIONAL_INPUT|INPUT|OUTPUT|ATTR|REQUIRED_ATTR)\((\w+)", header)
    assert names == json.loads(out.stdout.strip().splitlines()[-1])
    assert "OPTIONAL_INPUT(bias" in header and ".ATTR(alpha, Float, 1.0f)" in header
    assert ".ATTR(dims, ListInt, {})" in header


def test_writing_a_slice_defines_nothing_here(tmp_path):
    """`new-op` generates the binding from the declaration in a child process: the caller's
    registries (operators, aclnn and IR prototypes) are as they were."""
    import op_sdk
    from op_sdk.converters import ir
    from op_sdk.npu import prototypes

    before = ({o.qualname for o in op_sdk.registered_ops()}, set(prototypes.PROTOTYPES), set(ir.PROTOTYPES))
    new_op.write("quiet_op", "quiet_op(Tensor x) -> Tensor", str(tmp_path), namespace="gen_quiet")
    assert (tmp_path / "gen_quiet" / "csrc" / "npu" / "quiet_op.cpp").read_text().count("aclnnQuietOp") >= 2
    after = ({o.qualname for o in op_sdk.registered_ops()}, set(prototypes.PROTOTYPES), set(ir.PROTOTYPES))
    assert after == before


def _in_tree_ready() -> bool:
    return new_op.find_tree(str(ROOT)) == str(ROOT) and any((ROOT / "op_sdk").glob("_C*.so"))


@pytest.mark.skipif(not _in_tree_ready(), reason="needs op_sdk's source tree with its built extension")
def test_in_tree_slice_touches_only_its_files_and_passes_the_suite(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(
        ".git", "build", "__pycache__", "*.egg-info", ".pytest_cache", ".ruff_cache"))
    # a name no slice of this tree has (the suite may run in a tree with a scaffolded slice)
    name = next(n for n in (f"new_op_probe{i}" for i in range(100))
                if not (tree / "op_sdk" / "ops" / f"{n}.py").exists())
    before = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file()}
    env = {**os.environ, "PYTHONPATH": str(tree)}
    schema = f"{name}(Tensor x, Tensor? bias=None, float alpha=1.0, int[] dims=[]) -> Tensor"
    r = subprocess.run([sys.executable, "-m", "op_sdk", "new-op", name, "--in-tree", "--schema",
                        schema], cwd=tree / "tests", env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    after = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    added = {str(p.relative_to(tree)) for p in after.keys() - before.keys()}
    changed = {str(p.relative_to(tree)) for p in after.keys() & before.keys() if after[p] != before[p]}
    assert added == _slice_files("op_sdk", name), added ^ _slice_files("op_sdk", name)
    # the generated operator table, and README's NPU table (the slice has an Ascend C kernel
    # and an aclnn binding: an operator of op_sdk's own namespace with NPU deliverables)
    assert changed == {"docs/operators.md", "README.md"}, changed
    assert f"`op_sdk::{name}`" in (tree / "docs" / "operators.md").read_text()
    assert f"| `op_sdk::{name}` | CPU-model tested |" in (tree / "README.md").read_text()
    # the slice's tests and the registry-wide tests that read every slice
    out = _pytest([f"tests/ops/test_{name}.py", f"tests/ascendc/test_{name}_kernel.py",
                   "tests/ascendc/test_coverage.py", "tests/test_registry_coverage.py", "tests/test_opcheck.py",
                   "tests/test_ops_constraints.py", "tests/test_ops_schema.py", "tests/npu/test_bindings.py",
                   "tests/test_docs.py", "tests/test_converters.py", "-k", "not torch_npu_real"],
                  tree, tree)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-2000:]
    assert name in subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--collect-only", "-p", "no:cacheprovider",
         "tests/test_opcheck.py"], cwd=tree, env=env, capture_output=True, text=True).stdout
    # deleting the slice's files and regenerating the docs leaves the tree as it was
    for rel in added:
        (tree / rel).unlink()
    r = subprocess.run([sys.executable, "-m", "op_sdk", "docs"], cwd=tree, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    final = {p: p.read_bytes() for p in tree.rglob("*") if p.is_file() and "__pycache__" not in p.parts
             and ".pytest_cache" not in p.parts}
    assert final.keys() - before.keys() <= {p for p in final if p.is_dir()}
    assert {str(p.relative_to(tree)) for p in before if final.get(p) != before[p]} == set()


@pytest.mark.parametrize("name,args", [
    ("npu_" + "very_long_operator_name_" * 3 + "x",
     "(Tensor input_tensor_long, Tensor? optional_bias_tensor=None, float alpha_scaling_factor=1.0, "
     "int[] reduction_dims=[]) -> (Tensor, Tensor)"),
    # a schema string on a line of its own, its brackets and commas inside the literal (a fold
    # there once split the string)
    ("npu_gated_unit_clipped", "(Tensor x, Tensor? group_index=None, int dim=-1, float alpha=1.702, "
     "float limit=7., float bias=1., bool interleaved=True) -> Tensor"),
])
def test_generated_python_fits_the_linter_whatever_the_names(tmp_path, name, args):
    """Names of any length: every generated Python line parses and fits the tree's line length
    (folded, or a long literal such as the schema marked for the linter)."""
    import ast

    schema = name + args
    written = new_op.write(name, schema, str(tmp_path), namespace="gen_long")
    for path in (p for p in written if p.endswith(".py")):
        text = pathlib.Path(path).read_text()
        ast.parse(text)
        long = [line for line in text.splitlines() if len(line) > new_op.WIDTH
                and not line.endswith("# noqa: E501")]
        assert not long, (path, long)


@pytest.mark.parametrize("name,schema,match", [
    ("Bad", "Bad(Tensor x) -> Tensor", "lower-case identifier"),
    ("f", "f(Tensor x -> Tensor", "does not parse"),
    ("f", "g(Tensor x) -> Tensor", "names the operator 'g'"),
    ("f", "f(int k) -> Tensor", "first argument must be a Tensor"),
    ("f", "f(Tensor x) -> int", "return one or more Tensors"),
    ("f", "f(Tensor(a!) x) -> Tensor(a!)", "name ends with '_'"),
    ("f_", "f_(Tensor x, Tensor(a!) y) -> Tensor(a!)", "only the first argument"),
    ("f", "f(Tensor x, int? k=None) -> Tensor", "argument 'k' has type int?"),
])
def test_refuses_bad_input(tmp_path, name, schema, match, capsys):
    assert main(["new-op", name, "--schema", schema, "--out", str(tmp_path)]) == 2
    assert match in capsys.readouterr().err


def test_refuses_to_overwrite(tmp_path, capsys):
    assert main(["new-op", "f", "--schema", "f(Tensor x) -> Tensor", "--namespace", "gen_over",
                 "--out", str(tmp_path)]) == 0
    assert main(["new-op", "f", "--schema", "f(Tensor x) -> Tensor", "--namespace", "gen_over",
                 "--out", str(tmp_path)]) == 2
    assert "the slice 'f' exists" in capsys.readouterr().err


def test_in_tree_needs_the_tree(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["new-op", "f", "--in-tree", "--schema", "f(Tensor x) -> Tensor"]) == 2
    assert "inside op_sdk's source tree" in capsys.readouterr().err


@pytest.fixture(scope="module")
def binding_compiles(tmp_path_factory):
    """Each kind's generated OpPlugin binding and a copy with a misspelt macro, compiled
    against the torch-npu wheel's headers, all at once (one compiler per core: each parses
    torch's headers for about 25 s): {name: (error of the binding, error of the copy)},
    None where it compiled; or the reason the wheel is not here."""
    from concurrent.futures import ThreadPoolExecutor

    from op_sdk.app.ascendc_run import compile_binding
    from tests.npu.torch_npu_env import prepare

    env, why = prepare()
    if env is None:
        return why
    out = tmp_path_factory.mktemp("bindings")
    sources = {}
    for name, schema in KINDS:
        new_op.write(name, schema, str(out), namespace=f"gen_binding_{name.strip('_')}")
        source = out / f"gen_binding_{name.strip('_')}" / "csrc" / "npu" / f"{name.rstrip('_')}.cpp"
        broken = out / f"broken_{name.strip('_')}.cpp"  # the check compiles for real
        broken.write_text(source.read_text().replace("EXEC_NPU_CMD_EXT(", "EXEC_NPU_CMD_EXTX(", 1))
        sources[name] = (source, broken)

    def error(path):
        try:
            compile_binding(path, env.include_dirs[0])
        except RuntimeError as exc:
            return str(exc)
        return None

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        futures = {n: (pool.submit(error, a), pool.submit(error, b)) for n, (a, b) in sources.items()}
        return {n: (a.result(), b.result()) for n, (a, b) in futures.items()}


@pytest.mark.torch_npu_real
@pytest.mark.parametrize("name,schema", KINDS, ids=[k[0] for k in KINDS])
def test_generated_binding_compiles_against_torch_npu(binding_compiles, name, schema):
    """The OpPlugin binding the scaffold generates compiles against the torch-npu wheel's
    headers (op-plugin's EXEC_NPU_CMD_EXT, TORCH_LIBRARY_IMPL for PrivateUse1); a misspelt
    macro fails (the check compiles for real)."""
    if isinstance(binding_compiles, str):
        pytest.skip(binding_compiles)
    good, broken = binding_compiles[name]
    assert good is None, good
    assert broken is not None and "against torch_npu failed" in broken
