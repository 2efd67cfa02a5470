"""Builds op_sdk's C++ CPU kernels (op_sdk._C) with ninja through torch.utils.cpp_extension;
the package metadata is in pyproject.toml. Build against the torch already installed:

    pip install --no-build-isolation -e .      # or without -e, or: pip wheel --no-build-isolation .

With build isolation pip would download another torch (the newest, with its CUDA packages)
only to compile against it, and the extension would not load into the torch you have.
"""

import glob
import os
import platform
import shutil
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
X86 = platform.machine().lower() in ("x86_64", "amd64", "x64")

# -fopenmp: at::parallel_for is an inline `#pragma omp parallel` (torch's OpenMP backend);
# without the flag it silently runs on one thread. The .so then needs libgomp.so.1, which
# resolves to the copy torch has already loaded (one OpenMP runtime, torch's thread count).
# -std=c++20: what torch 2.13's headers expect (c++17 warns in c10/core/AutogradState.h).
# -ffp-contract=off: a * b + c stays two rounded operations, as in torch's own kernels;
# GCC would otherwise fuse them into FMA and move results by an ulp (where a kernel wants
# FMA it says so with fma()).
# -Wno-maybe-uninitialized, -Wno-uninitialized: GCC 12 false positives inside its own
# AVX-512 intrinsics (_mm512_undefined_*, uninitialized by design), reported at every
# inlined use (thousands of lines of a verbose build's output).
# -g0: Python's own CFLAGS carry -g; full debug info nearly doubles the compile time of each
# torch-including source and the size of the .so, and the release build does not need it.
CXX_FLAGS = ["-O3", "-g0", "-std=c++20", "-fopenmp", "-fno-math-errno", "-ffp-contract=off", "-Wall",
             "-Wno-unused-function", "-Wno-maybe-uninitialized", "-Wno-uninitialized"]
# OP_SDK_SANITIZE=1 (.ci/sanitize): AddressSanitizer + UndefinedBehaviorSanitizer at -O1
# with line tables only (-g1: file:line in reports at half the compile time of -g; frame
# pointers kept, every UB report fatal), for the build that sanitizer run loads in
# place of the release one through OP_SDK_NATIVE_LIB; never installed.
SANITIZE = os.environ.get("OP_SDK_SANITIZE") == "1"
SANITIZE_FLAGS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined",
                  "-fno-omit-frame-pointer"]
if SANITIZE:
    CXX_FLAGS = [f for f in CXX_FLAGS if f not in ("-O3", "-g0")] + ["-O1", "-g1"] + SANITIZE_FLAGS
# x86-64: baseline x86-64-v3 (AVX2 + FMA + F16C); hot loops add AVX-512 clones chosen at
# load time (kernels/simd.h), so one binary runs everywhere and uses what the CPU has.
# Elsewhere (aarch64 hosts of Ascend servers) the portable kernels of the same headers.
X86_FLAGS = ["-mavx2", "-mfma", "-mf16c"]

# Headers shipped inside the package (op_sdk/include/), for code that builds against the
# torch-free kernels: kernels/*.h, *.inl and csrc/*.h; csrc/npu/ (the OpPlugin bindings'
# sources); and kernels/ascendc/ as it is.
HEADER_DIRS = {"kernels": ("*.h", "*.inl"), "csrc": ("*.h",),
               # the OpPlugin bindings' sources (op_sdk.npu.binding reads them)
               os.path.join("csrc", "npu"): ("*.h", "*.cpp")}


class BuildPyWithHeaders(build_py):
    def run(self):
        super().run()
        for folder, patterns in HEADER_DIRS.items():
            target = os.path.join(self.build_lib, "op_sdk", "include", folder)
            os.makedirs(target, exist_ok=True)
            for pattern in patterns:
                for path in sorted(glob.glob(os.path.join(here, folder, pattern))):
                    shutil.copy2(path, target)
        # the Ascend C kernels (CANN's layout) and the CPU model they are tested on
        shutil.copytree(os.path.join(here, "kernels", "ascendc"),
                        os.path.join(self.build_lib, "op_sdk", "include", "kernels", "ascendc"),
                        dirs_exist_ok=True)


ext = CppExtension(
    name="op_sdk._C",
    sources=sorted(os.path.join("csrc", f) for f in os.listdir(os.path.join(here, "csrc"))
                   if f.endswith(".cpp")),
    include_dirs=[os.path.join(here, "kernels"), os.path.join(here, "csrc")],
    extra_compile_args={"cxx": CXX_FLAGS + (X86_FLAGS if X86 else [])},
    extra_link_args=["-fopenmp"] + (SANITIZE_FLAGS if SANITIZE else []),
    py_limited_api=False,
)



def torch_npu_dir() -> str | None:
    """torch_npu's package directory where it imports here (its headers and libtorch_npu),
    else None: without it the OpPlugin bindings are not built."""
    import importlib.util

    if importlib.util.find_spec("torch_npu") is None:
        return None
    try:
        import torch_npu
    except Exception:  # installed without CANN: as good as absent
        return None
    return os.path.dirname(torch_npu.__file__)


def npu_binding_extensions(npu_dir: str | None) -> list:
    """One library per OpPlugin-style binding of csrc/npu/ (op_sdk/npu_bindings/<op>*.so),
    with the flags of op_sdk.npu.build.compile_command; none without torch_npu. Which of
    them register is decided at run time (op_sdk.npu.build.load_bindings)."""
    if npu_dir is None:
        return []
    import torch

    minor = int(torch.__version__.split(".")[1])
    inc = os.path.join(npu_dir, "include")
    out = []
    for path in sorted(glob.glob(os.path.join(here, "csrc", "npu", "*.cpp"))):
        name = os.path.basename(path)[:-4]
        out.append(CppExtension(
            name=f"op_sdk.npu_bindings.{name}",
            sources=[os.path.relpath(path, here)],
            include_dirs=[os.path.join(here, "csrc", "npu"), inc,
                          os.path.join(inc, "third_party", "op-plugin"),
                          os.path.join(inc, "third_party", "acl", "inc")],
            # op-plugin's version of this torch (op_plugin/utils/Version.h: V2R<minor> = minor - 1)
            define_macros=[("CURRENT_VERSION", str(minor - 1))],
            extra_compile_args={"cxx": ["-O2", "-std=c++20"]},
            library_dirs=[os.path.join(npu_dir, "lib")],
            libraries=["torch_npu"],
            extra_link_args=[f"-Wl,-rpath,{os.path.join(npu_dir, 'lib')}"],
            py_limited_api=False,
        ))
    return out


class BuildExt(BuildExtension.with_options(use_ninja=True)):
    """torch's extension builder (ninja: the sources compile in parallel, ``[k/N]`` per
    source on a verbose pip's screen), with its objects in a folder of the source tree that
    outlives the build (``build/temp-py<X.Y>-torch<version>``, ``-sanitize`` for the
    sanitizer flags) unless ``--build-temp`` names another: pip's builds use a fresh
    temporary folder each time, so a second ``pip install -e .`` (the README's second
    command after its first) would compile every source again; here ninja finds the
    objects up to date and compiles only what changed ("ninja: no work to do")."""

    def finalize_options(self):
        if self.build_temp is None:
            import torch

            tag = f"py{sys.version_info[0]}.{sys.version_info[1]}-torch{torch.__version__}"
            self.build_temp = os.path.join(here, "build", f"temp-{tag}"
                                           + ("-sanitize" if SANITIZE else ""))
        super().finalize_options()


setup(
    ext_modules=[ext] + npu_binding_extensions(torch_npu_dir()),
    cmdclass={"build_ext": BuildExt, "build_py": BuildPyWithHeaders},
)
