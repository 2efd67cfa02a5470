"""The OpPlugin-style eager bindings (csrc/npu/) beside the real torch_npu, which CANN stub
libraries let import on x86 (run by tests/npu/test_torch_npu_real.py):

* each binding compiles on x86 against the wheel's headers (op-plugin's EXEC_NPU_CMD_EXT,
  -DCURRENT_VERSION for torch 2.13), and its compile-time check rejects arguments whose
  converted C types contradict the aclnn prototype;
* each library loads, and its TORCH_LIBRARY_IMPL(<ns>, PrivateUse1) kernel is accepted by the
  dispatcher for the operator's schema (torch_npu's, for the npu operators);
* the registration decision: beside torch_npu 2.13, which defines every npu operator op_sdk
  binds, no npu binding registers (torch_npu's kernels stay), the plugin example's does;
  against the real registry minus one operator (an older torch_npu), exactly that one would.

No binding's kernel is called: that would reach ACL. Nothing here is verified on hardware.
"""

import dataclasses
import glob
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_npu

import op_sdk
from op_sdk.app import deliverables
from op_sdk.npu import binding as nb
from op_sdk.npu import build as nbuild
from tests.npu.binding_build import build, build_all
from tests.npu.real.conftest import TORCH_NPU_DEFINES

TORCH_NPU_DIR = os.path.dirname(torch_npu.__file__)
# the tree these tests are in (its setup.py; op_sdk may be installed elsewhere)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BINDINGS = deliverables.declared_bindings()
# the bindings of npu operators torch_npu defines (none registers); of those it lacks (an
# in-tree npu_* slice torch_npu does not have, or an operator of op_sdk's own namespace such
# as op_sdk::rms_norm_rope), each registers
NPU_BINDINGS = [o for o in BINDINGS if o.qualname in TORCH_NPU_DEFINES]
BACKFILLED = [o for o in BINDINGS if o.qualname not in TORCH_NPU_DEFINES]


# the worked example's binding (a user project's csrc/npu), built beside op_sdk's own
EXAMPLE = os.path.join(ROOT, "examples", "silu_mul_quant")
EXAMPLE_SOURCES = {"silu_mul_quant": os.path.join(EXAMPLE, "csrc", "npu", "silu_mul_quant.cpp")}


@pytest.fixture(scope="module")
def built():
    sources = {**nb.binding_sources(), **EXAMPLE_SOURCES}
    return build_all({name: open(path).read() for name, path in sources.items()}, TORCH_NPU_DIR)


@pytest.fixture(scope="module")
def libdir(built, tmp_path_factory):
    """The built libraries under the names load_bindings looks for."""
    d = tmp_path_factory.mktemp("npu_bindings")
    for name, b in built.items():
        if b.ok:
            os.symlink(b.library, d / f"{name}.so")
    return str(d)


@pytest.mark.parametrize("name", sorted({**nb.binding_sources(), **EXAMPLE_SOURCES}))
def test_binding_compiles_against_torch_npu_headers(built, name):
    b = built[name]
    assert b.ok, f"{name} does not compile against torch_npu's headers:\n{b.errors[-6000:]}"
    undefined = subprocess.run(["nm", "-D", "--undefined-only", b.library], capture_output=True,
                               text=True, check=True).stdout
    # the aclnn call goes through op-plugin's runtime (resolved in libtorch_npu), not a
    # link-time CANN symbol
    assert "GetApiFunc" in undefined and "aclnn" not in undefined.replace("GetApiFunc", "")


def _variant(name: str, old: str, new: str) -> str:
    source = open(nb.binding_sources()[name]).read()
    assert source.count(old) == 2, old  # the compile-time check and the call
    return source.replace(old, new)


def test_compile_time_check_rejects_a_mistyped_argument_order():
    """gamma and epsilon swapped: the converted types (double, aclTensor*) contradict the
    prototype (const aclTensor*, double) at position 1: the build fails naming both."""
    b = build("npu_rms_norm_swapped",
              _variant("npu_rms_norm", "aclnnRmsNorm, input, gamma, epsilon,",
                       "aclnnRmsNorm, input, epsilon, gamma,"), TORCH_NPU_DIR)
    assert not b.ok
    assert re.search(r"aclnn_argument_matches_prototype<1, const aclTensor\s?\*, double, false>",
                     b.errors), b.errors[-4000:]


def test_compile_time_check_covers_each_selected_api():
    """npu_quantize's second call (aclnnAscendQuantV3, div_mode=False) with sqrtMode and
    roundMode swapped: position 3 of that prototype is bool, the argument a const char*."""
    api = "aclnnAscendQuantV3, input, scales, zero_points, "
    b = build("npu_quantize_swapped",
              _variant("npu_quantize", api + "sqrtMode, roundMode,", api + "roundMode, sqrtMode,"),
              TORCH_NPU_DIR)
    assert not b.ok
    assert re.search(r"aclnn_argument_matches_prototype<3, bool, const char\s?\*, false>",
                     b.errors), b.errors[-4000:]


def test_compile_time_check_rejects_a_missing_argument():
    b = build("npu_add_rms_norm_short",
              _variant("npu_add_rms_norm", "x1, x2, gamma, epsilon,", "x1, x2, gamma,"),
              TORCH_NPU_DIR)
    assert not b.ok
    assert "the number of arguments differs from the aclnn prototype's" in b.errors, b.errors[-4000:]


PROBE = """
#include "binding.h"

namespace {
at::Tensor probe(const at::Tensor& scale, const c10::optional<at::Tensor>& offset,
                 const c10::optional<at::Tensor>& pertoken_scale, const at::Tensor& out) {
  return op_sdk_npu::quant_matmul_scale(scale, offset, pertoken_scale, out);
}
}  // namespace

TORCH_LIBRARY(opsdk_probe, m) {
  m.def("quant_matmul_scale(Tensor scale, Tensor? offset, Tensor? pertoken_scale, Tensor out) -> Tensor");
  m.impl("quant_matmul_scale", c10::DispatchKey::CompositeExplicitAutograd, TORCH_FN(probe));
}
"""


def test_quant_matmul_scale_conversion_runs_in_torch_npus_case_only():
    """binding.h's quant_matmul_scale (the npu_quant_matmul binding's scale preparation),
    built against the wheel's headers and called on Meta tensors beside the real torch_npu:
    a float32 scale without pertoken_scale and with an output other than bfloat16 / int32 comes
    back as npu_trans_quant_param's int64 parameters (torch_npu's own operator, its Meta
    function; with the offset's shape when the offset is longer), any other scale unchanged."""
    b = build("quant_matmul_scale_probe", PROBE, TORCH_NPU_DIR)
    assert b.ok, b.errors[-6000:]
    out = _run(f"""
        import torch, torch_npu
        assert torch.npu.is_available() is False
        torch.ops.load_library({b.library!r})
        f = torch.ops.opsdk_probe.quant_matmul_scale
        m = dict(device="meta")
        def out(dt):
            return torch.empty(4, 8, dtype=dt, **m)
        s32 = torch.empty(8, **m)
        # the scales that must stay as they are have a shape npu_trans_quant_param rejects
        # ((2, 8): only (n,) and (1, n) are taken), so converting one would raise
        k32, k16 = torch.empty(2, 8, **m), torch.empty(2, 8, dtype=torch.bfloat16, **m)
        cases = [
            ("fp32 int8-out", f(s32, None, None, out(torch.int8))),
            ("fp32 fp16-out", f(s32, None, None, out(torch.float16))),
            ("fp32 offset", f(torch.empty(1, **m), torch.empty(8, **m), None, out(torch.int8))),
            ("fp32 pertoken", f(k32, None, torch.empty(4, **m), out(torch.float16))),
            ("fp32 bf16-out", f(k32, None, None, out(torch.bfloat16))),
            ("fp32 int32-out", f(k32, None, None, out(torch.int32))),
            ("bf16 bf16-out", f(k16, None, None, out(torch.bfloat16))),
            ("int64 int8-out", f(torch.empty(2, 8, dtype=torch.int64, **m), None, None, out(torch.int8))),
        ]
        for name, r in cases:
            print(name, str(r.dtype).replace("torch.", ""), list(r.shape))
    """)
    assert out.splitlines()[-8:] == [
        "fp32 int8-out int64 [8]", "fp32 fp16-out int64 [8]", "fp32 offset int64 [8]",
        "fp32 pertoken float32 [2, 8]", "fp32 bf16-out float32 [2, 8]", "fp32 int32-out float32 [2, 8]",
        "bf16 bf16-out bfloat16 [2, 8]", "int64 int8-out int64 [2, 8]"], out


def _run(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                         text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-6000:]
    return out.stdout


def _private_use1(dump: str) -> str:
    return next((line for line in dump.splitlines() if line.startswith("PrivateUse1:")), "")


def test_npu_bindings_stay_out_beside_torch_npu(libdir):
    """torch_npu 2.13 defines every npu operator op_sdk binds: none registers, and each keeps
    torch_npu's own PrivateUse1 kernel."""
    status = nbuild.load_bindings(NPU_BINDINGS, directory=libdir)
    assert status == {o.qualname: "skipped: torch_npu defines it (its own kernel serves it)"
                      for o in NPU_BINDINGS}
    for opdef in NPU_BINDINGS:
        line = _private_use1(torch._C._dispatch_dump(opdef.qualname))
        assert line and "csrc/npu" not in line and libdir not in line, line


def test_bindings_of_what_torch_npu_lacks_register(libdir):
    """An operator torch_npu does not define (an in-tree npu_* slice of op_sdk's own, or an
    op_sdk-namespace operator): op_sdk defines it and its binding gives it a PrivateUse1
    kernel."""
    assert "op_sdk::rms_norm_rope" in {o.qualname for o in BACKFILLED}
    nbuild.load_bindings(BACKFILLED, directory=libdir)
    for opdef in BACKFILLED:
        assert opdef.owned, opdef.qualname
        line = _private_use1(torch._C._dispatch_dump(opdef.qualname))
        assert f"{opdef.name}.cpp" in line, line


def test_plugin_binding_registers_beside_torch_npu(libdir):
    """The plugin example's operator is no torch_npu operator: its binding registers a
    PrivateUse1 kernel (the dispatcher checks its C++ signature against the schema)."""
    out = _run(f"""
        import sys, torch, torch_npu
        assert torch.npu.is_available() is False
        import op_sdk
        from op_sdk.npu import build as nbuild
        sys.path.insert(0, {EXAMPLE!r})
        import my_ops
        opdef = op_sdk.get_op("silu_mul_quant", "my_ops")
        assert opdef.binding_status.startswith("not built"), opdef.binding_status
        print(nbuild.load_bindings([opdef], directory={libdir!r}))
        print(torch._C._dispatch_dump("my_ops::silu_mul_quant"))
        # loading again registers nothing twice: the kernel is there now
        print(nbuild.load_bindings([opdef], directory={libdir!r}))
    """)
    assert "{'my_ops::silu_mul_quant': 'registered'}" in out, out
    assert "{'my_ops::silu_mul_quant': 'skipped: a PrivateUse1 kernel is already registered'}" in out
    line = _private_use1(out)
    assert "silu_mul_quant.cpp" in line and "[ boxed unboxed ]" in line, out


def test_each_npu_binding_signature_fits_torch_npus_schema(libdir):
    """In a throwaway process, each npu binding is loaded on purpose over torch_npu's kernel:
    the dispatcher accepts its C++ signature for torch_npu's schema (an inferred schema that
    differs is an error at registration), so a backfill on an older torch_npu registers."""
    names = [o.name for o in NPU_BINDINGS]
    out = _run(f"""
        import os, torch, torch_npu
        assert torch.npu.is_available() is False
        for name in {names!r}:
            torch.ops.load_library(os.path.join({libdir!r}, name + ".so"))
            dump = torch._C._dispatch_dump("npu::" + name)
            line = [l for l in dump.splitlines() if l.startswith("PrivateUse1:")][0]
            assert name + ".cpp" in line, (name, dump)
            print("ok", name)
    """)
    assert [line for line in out.splitlines() if line.startswith("ok ")] == [f"ok {n}" for n in names], out


@pytest.mark.parametrize("missing", NPU_BINDINGS, ids=lambda o: o.name)
def test_backfill_decision_against_the_real_registry_minus_one_operator(missing):
    """An older torch_npu that lacks ``missing``: op_sdk would then define its schema itself
    (owned) and no PrivateUse1 kernel would exist; the decision, reading the real registry
    for every other operator, registers exactly that binding."""
    def has_kernel(q, key):
        if q == missing.qualname:
            return False
        return torch._C._dispatch_has_kernel_for_dispatch_key(q, key)

    assert torch._C._dispatch_has_kernel_for_dispatch_key(missing.qualname, "PrivateUse1")
    opdefs = [dataclasses.replace(o, owned=(o.qualname == missing.qualname)) for o in NPU_BINDINGS]
    status = nbuild.decide(opdefs, lambda q: op_sdk.library._has_schema(*q.split("::")), has_kernel)
    assert [q for q, s in status.items() if s == "register"] == [missing.qualname], status


def test_deliverables_report_the_level_reached():
    from op_sdk.app.deliverables import BINDING_LEVEL, npu_deliverables

    for opdef in NPU_BINDINGS:
        level = npu_deliverables(opdef)
        assert BINDING_LEVEL in level["opplugin_binding"]
        assert "torch_npu defines it" in level["opplugin_binding"]
        assert level["hardware"] == "not verified"


def test_setup_py_builds_every_binding_with_torch_npu():
    from tests.npu.binding_build import setup_extensions

    if not os.path.exists(os.path.join(ROOT, "setup.py")):
        pytest.skip("no source tree beside the tests")
    ext = {e[0]: e for e in setup_extensions(ROOT, dict(os.environ))}
    names = sorted(nb.binding_sources())
    assert sorted(ext) == sorted(["op_sdk._C"] + [f"op_sdk.npu_bindings.{n}" for n in names])
    for n in names:
        assert ext[f"op_sdk.npu_bindings.{n}"][1] == [f"csrc/npu/{n}.cpp"]
        assert ext[f"op_sdk.npu_bindings.{n}"][2] == {"CURRENT_VERSION": "12"}


def test_cmake_configures_every_binding_with_torch_npu(tmp_path):
    """CMakeLists.txt, configured where torch_npu imports, defines one library target per
    binding with op-plugin's CURRENT_VERSION (building them is what the tests above do with
    the same flags)."""
    import shutil

    cmake = shutil.which("cmake")
    if cmake is None or not os.path.exists(os.path.join(ROOT, "CMakeLists.txt")):
        pytest.skip("no cmake, or no source tree beside the tests")
    out = subprocess.run([cmake, "-S", ROOT, "-B", str(tmp_path), f"-DPython3_EXECUTABLE={sys.executable}"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"op_sdk: torch_npu at {TORCH_NPU_DIR}: OpPlugin bindings of csrc/npu/ built" in out.stdout
    targets = subprocess.run([cmake, "--build", str(tmp_path), "--target", "help"],
                             capture_output=True, text=True, timeout=300).stdout
    for name in nb.binding_sources():
        assert f"op_sdk_binding_{name}" in targets, targets[-3000:]
    # the compile flags: CMakeFiles/<target>.dir/flags.make (Makefiles) or build.ninja
    files = glob.glob(str(tmp_path / "CMakeFiles" / "op_sdk_binding_*" / "flags.make"))
    files += glob.glob(str(tmp_path / "build.ninja"))
    assert "-DCURRENT_VERSION=12" in "".join(open(p).read() for p in files)
