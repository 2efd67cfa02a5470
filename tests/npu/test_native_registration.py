"""A native kernel that cannot be registered costs its operator the native kernel, with a
warning naming it, never the process: the failure torch_npu's differing C++ signatures
used to cause (an abort at `import op_sdk`), reproduced with a small library of our own
that registers a kernel for npu::npu_rms_norm with another C++ signature first."""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONFLICT = r"""
#include <torch/library.h>
// Another library's kernel for the same schema, taking its tensors by value: a C++
// signature the dispatcher finds different from op_sdk's (const Tensor&).
std::tuple<at::Tensor, at::Tensor> other_rms_norm(at::Tensor x, at::Tensor g, double) {
  return {x, g};
}
TORCH_LIBRARY(npu, m) {
  m.def("npu_rms_norm(Tensor input, Tensor gamma, float epsilon=1e-06) -> (Tensor, Tensor)");
}
TORCH_LIBRARY_IMPL(npu, PrivateUse1, m) { m.impl("npu_rms_norm", &other_rms_norm); }
"""


@pytest.fixture(scope="module")
def conflicting_library(tmp_path_factory):
    build = tmp_path_factory.mktemp("conflict")
    src = build / "conflict.cpp"
    src.write_text(CONFLICT)
    # built in a child process: cpp_extension.load also loads the library, which must not
    # happen in this one
    code = ("from torch.utils import cpp_extension; cpp_extension.load(name='op_sdk_conflict', "
            f"sources=[{str(src)!r}], build_directory={str(build)!r}, is_python_module=False)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    return str(build / "op_sdk_conflict.so")


def test_conflicting_cpp_signature_degrades_to_a_warning(conflicting_library):
    code = textwrap.dedent(f"""
        import warnings, torch
        torch.ops.load_library({conflicting_library!r})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            import op_sdk
        messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
        assert len(messages) == 1, messages
        assert "npu::npu_rms_norm" in messages[0] and "CPU" in messages[0], messages
        assert "Mismatch in kernel C++ signatures" in messages[0], messages
        rms = op_sdk.get_op("npu_rms_norm")
        assert rms.kernel_devices()["cpu"] == "reference" and "CPU" in rms.native_errors
        x, g = torch.randn(3, 16), torch.randn(16)
        y, rstd = torch.ops.npu.npu_rms_norm(x, g)
        ref = rms.reference(x, g)
        assert torch.equal(y, ref[0]) and torch.equal(rstd, ref[1])
        others = [o for o in op_sdk.registered_ops() if "cpu" in o.native and o is not rms]
        assert others and all(o.kernel_devices()["cpu"] == "native" for o in others)
        print("survived")
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0 and "survived" in out.stdout, out.stdout + out.stderr[-4000:]


def test_native_op_list_matches_the_declarations():
    import op_sdk
    from op_sdk import _native

    declared = {(o.namespace, o.name) for o in op_sdk.registered_ops() if "cpu" in o.native}
    assert set(_native.native_ops()) == declared
    assert all(not o.native_errors for o in op_sdk.registered_ops())


def test_missing_extension_is_logged_and_the_references_run():
    code = textwrap.dedent("""
        import logging, sys, io
        stream = io.StringIO()
        logging.basicConfig(stream=stream, level=logging.WARNING)
        sys.modules["op_sdk._C"] = None  # makes `import op_sdk._C` raise ImportError
        import torch, op_sdk
        assert "op_sdk._C" in stream.getvalue() and "did not load" in stream.getvalue(), stream.getvalue()
        # every declared native kernel falls back to the reference (a Python kernel stays)
        devices = {o.qualname: o.kernel_devices()["cpu"] for o in op_sdk.registered_ops()
                   if "cpu" not in o.kernels}
        assert set(devices.values()) == {"reference"}, devices
        assert all(o.kernel_devices()["cpu"] == "python" for o in op_sdk.registered_ops()
                   if "cpu" in o.kernels)
        y, s = torch.ops.npu.npu_dynamic_quant(torch.randn(3, 8))
        assert y.dtype == torch.int8
        from op_sdk.app import cli
        cli.main(["ops"])
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr[-4000:]
    assert "native CPU kernels missing: op_sdk._C did not load" in out.stdout, out.stdout
