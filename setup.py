"""Builds op_sdk and its C++ CPU kernels (op_sdk._C) with ninja through
torch.utils.cpp_extension. Install with ``pip install --no-build-isolation -e .`` so the
build uses the torch already installed instead of downloading another."""

import glob
import os

from setuptools import find_packages, setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))

# Baseline x86-64-v3 (AVX2 + FMA + F16C); hot loops add AVX-512 clones chosen at load
# time (see kernels/simd.h), so one binary runs everywhere and uses what the CPU has.
# -fopenmp: at::parallel_for is an inline `#pragma omp parallel` (torch's OpenMP backend);
# without the flag it silently runs on one thread. The .so then needs libgomp.so.1, which
# resolves to the copy torch has already loaded (one OpenMP runtime, torch's thread count).
# -std=c++20: what torch 2.13's headers expect (c++17 warns in c10/core/AutogradState.h).
# -ffp-contract=off: a * b + c stays two rounded operations, as in torch's own kernels;
# GCC would otherwise fuse them into FMA and move results by an ulp (where a kernel wants
# FMA it says so with fma()).
# -Wno-maybe-uninitialized: GCC 12 false positives inside its own AVX-512 intrinsics
# (_mm512_undefined_*), reported at every inlined use.
cxx_flags = ["-O3", "-std=c++20", "-fopenmp", "-mavx2", "-mfma", "-mf16c",
             "-fno-math-errno", "-ffp-contract=off", "-Wall", "-Wno-unused-function", "-Wno-maybe-uninitialized"]

ext = CppExtension(
    name="op_sdk._C",
    sources=sorted(glob.glob(os.path.join("csrc", "*.cpp"))),
    include_dirs=[os.path.join(here, "kernels"), os.path.join(here, "csrc")],
    extra_compile_args={"cxx": cxx_flags},
    extra_link_args=["-fopenmp"],
    py_limited_api=False,
)

setup(
    name="op_sdk",
    version="0.1.0",
    description="Fused operators and FX fusion passes for PyTorch graph mode",
    packages=find_packages(include=["op_sdk", "op_sdk.*"]),
    ext_modules=[ext],
    cmdclass={"build_ext": BuildExtension.with_options(use_ninja=True)},
    python_requires=">=3.10",
    install_requires=[],  # torch is expected to be installed already
    entry_points={"console_scripts": ["op-sdk=op_sdk.cli:main"]},
)
