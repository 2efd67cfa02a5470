"""Building and loading the OpPlugin-style bindings of op_sdk.npu.binding: the compile
flags (setup.py, CMakeLists.txt and the tests use the same), and the registration of a
built binding only for operators the installed torch_npu does not define."""

from __future__ import annotations

import glob
import os
import re

from op_sdk.npu.binding import PACKAGE, SOURCE_DIR
from op_sdk.npu.runtime import has_schema, torch_npu_module

__all__ = ["current_version", "include_dirs", "compile_command", "decide", "binding_dir",
           "library_path", "load_bindings"]


# ---------------------------------------------------------------------------------------
# Build flags (setup.py, CMake and the tests use the same)


def current_version(torch_version: str) -> int:
    """op-plugin's CURRENT_VERSION for a torch version: V2R<minor> is minor - 1
    (op_plugin/utils/Version.h: V2R1 = 0, ..., V2R13 = 12)."""
    major, minor = (int(x) for x in re.match(r"(\d+)\.(\d+)", torch_version).groups())
    if major != 2:
        raise ValueError(f"op-plugin versions exist for torch 2.x, not {torch_version}")
    return minor - 1


def include_dirs(torch_npu_dir: str) -> list[str]:
    """csrc/npu and the torch_npu wheel's headers (op-plugin's under third_party/)."""
    inc = os.path.join(torch_npu_dir, "include")
    return [SOURCE_DIR, inc, os.path.join(inc, "third_party", "op-plugin"),
            os.path.join(inc, "third_party", "acl", "inc")]


def compile_command(source: str, output: str, torch_npu_dir: str, cxx: str = "g++") -> list[str]:
    """The command that builds one binding library on this machine (the flags setup.py and
    CMakeLists.txt use): torch's and torch_npu's headers, op-plugin's CURRENT_VERSION for
    the installed torch, linked against libtorch_npu."""
    import sysconfig

    import torch
    from torch.utils import cpp_extension

    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    # the wheels' headers as system headers: their own warnings are not the binding's
    system = (include_dirs(torch_npu_dir)[1:] + cpp_extension.include_paths()
              + [sysconfig.get_paths()["include"]])
    return [cxx, "-shared", "-fPIC", "-O1", "-std=c++20", "-Wall", "-Werror",
            f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
            f"-DCURRENT_VERSION={current_version(torch.__version__)}", f"-I{SOURCE_DIR}",
            *(f"-isystem{d}" for d in system), source, "-o", output,
            f"-L{os.path.join(torch_npu_dir, 'lib')}", "-ltorch_npu",
            *(f"-L{d}" for d in cpp_extension.library_paths()), "-ltorch", "-ltorch_cpu", "-lc10",
            f"-Wl,-rpath,{os.path.join(torch_npu_dir, 'lib')}"]


# ---------------------------------------------------------------------------------------
# Registration: only for operators the installed torch_npu does not define


def decide(opdefs, has_schema, has_kernel) -> dict[str, str]:
    """{qualname: "register" or why not} for the operators with a binding.

    has_schema(qualname) and has_kernel(qualname, dispatch_key) read a registry (the
    dispatcher's, or a test's). A binding registers only when op_sdk defined the schema
    itself (opdef.owned: torch_npu lacks the operator) and no PrivateUse1 kernel exists."""
    out = {}
    for opdef in opdefs:
        if getattr(opdef, "aclnn", None) is None:
            continue
        q = opdef.qualname
        if not opdef.owned:
            out[q] = "skipped: torch_npu defines it (its own kernel serves it)"
        elif has_kernel(q, "PrivateUse1"):
            out[q] = "skipped: a PrivateUse1 kernel is already registered"
        elif not has_schema(q):
            out[q] = "skipped: the schema is not defined"
        else:
            out[q] = "register"
    return out


def binding_dir() -> str | None:
    """Where the built binding libraries are (op_sdk/npu_bindings/), or None."""
    d = os.path.join(PACKAGE, "npu_bindings")
    return d if os.path.isdir(d) else None


def library_path(opdef, directory: str | None = None) -> str | None:
    """The built binding library of ``opdef`` in ``directory`` (default: the package's
    npu_bindings/): ``<operator>.so`` or setup.py's ``<operator>.<abi tag>.so``."""
    directory = directory or binding_dir()
    if directory is None:
        return None
    found = sorted(glob.glob(os.path.join(directory, f"{opdef.name}.so"))
                   + glob.glob(os.path.join(directory, f"{opdef.name}.*.so")))
    return found[0] if found else None


def load_bindings(opdefs, directory: str | None = None) -> dict[str, str]:
    """Load the built binding of every operator ``decide`` registers; returns
    {qualname: status} and records it in each OpDef's ``binding_status``. Does nothing
    without torch_npu (the libraries link libtorch_npu, and PrivateUse1 is its device)."""
    import torch

    if torch_npu_module() is None:
        return {}
    opdefs = [o for o in opdefs if o.aclnn is not None]

    def has_kernel(q, key):
        return torch._C._dispatch_has_kernel_for_dispatch_key(q, key)

    status = decide(opdefs, has_schema, has_kernel)
    for opdef in opdefs:
        q = opdef.qualname
        if status[q] == "register":
            path = library_path(opdef, directory)
            if path is None:
                status[q] = "not built (op_sdk was built where torch_npu was not importable)"
            else:
                torch.ops.load_library(path)
                status[q] = "registered"
        opdef.binding_status = status[q]
    return status
