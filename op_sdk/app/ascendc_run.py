"""Build and load an Ascend C kernel's driver on op_sdk's CPU model of the Ascend C API
(the package's kernels/ascendc/model), for the tests `op-sdk new-op` writes: g++ -std=c++17
against the model, the shared Ascend C helpers (kernels/ascendc/common) and the operator's
own folder, one shared library per driver and set of defines, loaded with ctypes."""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

__all__ = ["Builder", "ascendc_include", "torch_npu_include", "compile_binding"]

CXXFLAGS = ["-std=c++17", "-O1", "-ffp-contract=off", "-shared", "-fPIC"]


def ascendc_include() -> Path:
    """kernels/ascendc of this installation (model/ and common/ beneath it)."""
    from op_sdk.app.deliverables import ascendc_root

    root = ascendc_root()
    if root is None:
        raise FileNotFoundError("op_sdk's kernels/ascendc is not installed with this package")
    return Path(root)


class Builder:
    """Compiles drivers of Ascend C kernels against the CPU model (once per driver and
    defines) into ctypes libraries: ``source_root`` holds the kernels' folders,
    ``drivers`` the ``driver_<name>.cpp`` files :meth:`lib` finds by name."""

    def __init__(self, source_root, outdir, cxx: str | None = None, drivers=None):
        self.source_root, self.outdir = Path(source_root), Path(outdir)
        self.drivers = Path(drivers) if drivers is not None else None
        self.cxx = shutil.which(cxx or os.environ.get("CXX", "g++"))
        self.libs: dict = {}

    def library(self, driver, **defines) -> ctypes.CDLL:
        key = (str(driver), tuple(sorted(defines.items())))
        if key not in self.libs:
            inc = ascendc_include()
            tag = hashlib.sha1(repr(key).encode()).hexdigest()[:12]
            out = self.outdir / f"{Path(driver).stem}_{tag}.so"
            cmd = [self.cxx, *CXXFLAGS, f"-I{inc / 'model'}", f"-I{inc}", f"-I{self.source_root}",
                   *[f"-D{k}={v}" for k, v in sorted(defines.items())], str(driver), "-o", str(out)]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                raise RuntimeError(f"compiling {driver} failed:\n{' '.join(cmd)}\n{r.stderr[-6000:]}")
            self.libs[key] = ctypes.CDLL(str(out))
        return self.libs[key]

    def lib(self, name: str, **defines) -> ctypes.CDLL:
        """The library of ``drivers/driver_<name>.cpp`` built with ``defines``."""
        return self.library(self.drivers / f"driver_{name}.cpp", **defines)


def torch_npu_include() -> str | None:
    """torch_npu's include directory, found without importing torch_npu (None when it is
    not installed)."""
    spec = importlib.util.find_spec("torch_npu")
    if spec is None or not spec.submodule_search_locations:
        return None
    inc = os.path.join(list(spec.submodule_search_locations)[0], "include")
    return inc if os.path.isdir(inc) else None


def compile_binding(source, include: str, cxx: str | None = None) -> None:
    """Compile an OpPlugin binding source (syntax and types) against torch's and torch_npu's
    headers; raises with the compiler's message."""
    import torch.utils.cpp_extension as ext

    from op_sdk.npu.binding import SOURCE_DIR

    cxx = shutil.which(cxx or os.environ.get("CXX", "g++"))
    incs = ext.include_paths() + [SOURCE_DIR, include, os.path.join(include, "third_party", "op-plugin"),
                                  os.path.join(include, "third_party", "op-plugin", "op_plugin",
                                               "include"), sysconfig.get_paths()["include"]]
    cmd = [cxx, "-std=c++17", "-fsyntax-only", "-DCURRENT_VERSION=12",
           "-D_GLIBCXX_USE_CXX11_ABI=" + str(int(__import__("torch")._C._GLIBCXX_USE_CXX11_ABI)),
           *[f"-I{i}" for i in incs], str(source)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"compiling {source} against torch_npu failed:\n{r.stderr[-6000:]}")
