"""The torch-free kernels build and pass on every host op_sdk supports, not only x86-64.

* tests/toolchain/kernels_test.cpp, built for this host and run: the portable kernels
  (opk::generic) against scalar references, the software fp16 conversions against an
  independent reference, and on x86-64 generic == AVX2 bit for bit.
* The same program cross-compiled for aarch64 (the Kunpeng hosts of Ascend servers) and run
  under qemu-user; every csrc/*.cpp compile-checked for aarch64 against torch's headers.

The cross compiler (Debian's g++-aarch64-linux-gnu) and qemu-user are optional here and
installed by .ci/run, which sets OP_SDK_REQUIRE_TOOLCHAINS=1 so that they are not skipped there.
"""

from __future__ import annotations

import os
import subprocess
import sysconfig
from concurrent.futures import ThreadPoolExecutor

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCE = os.path.join(ROOT, "tests", "toolchain", "kernels_test.cpp")
FLAGS = ["-O2", "-std=c++20", "-ffp-contract=off", "-fno-math-errno", "-Wall", "-Werror",
         "-Wno-unused-function", "-I" + os.path.join(ROOT, "kernels")]
CROSS = "aarch64-linux-gnu-g++"


def _run(cmd: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    assert result.returncode == 0, f"{' '.join(cmd[:3])} ...: {result.stdout[-2000:]}{result.stderr[-4000:]}"
    return result


def test_portable_kernels_on_this_host(tmp_path, require_tool):
    cxx = require_tool(os.environ.get("CXX", "g++"))
    exe = str(tmp_path / "kernels_test")
    x86 = os.uname().machine in ("x86_64", "AMD64")
    _run([cxx, *FLAGS, *(["-mavx2", "-mfma", "-mf16c"] if x86 else []), SOURCE, "-o", exe])
    out = _run([exe]).stdout
    assert out.startswith("ok: 0 failure(s)"), out
    if x86:
        assert "generic == avx2" in out


def test_portable_kernels_on_aarch64_under_qemu(tmp_path, require_tool):
    cross = require_tool(CROSS)
    qemu = require_tool("qemu-aarch64")
    exe = str(tmp_path / "kernels_test_aarch64")
    _run([cross, *FLAGS, "-static", SOURCE, "-o", exe])
    out = _run([qemu, exe]).stdout
    assert out.startswith("ok: 0 failure(s)") and "[portable]" in out, out


SOURCES = sorted(f for f in os.listdir(os.path.join(ROOT, "csrc")) if f.endswith(".cpp"))


# the torch headers every source reads (most of each check's time), precompiled once
TORCH_HEADERS = ("ATen/ATen.h", "ATen/Parallel.h", "ATen/core/dispatch/Dispatcher.h",
                 "torch/library.h")


@pytest.fixture(scope="module")
def aarch64_syntax_checks(request, require_tool, tmp_path_factory):
    """Every selected source's aarch64 compile check, run as one batch with a process per
    core: source -> result. The torch headers they share are precompiled first with the
    same flags (each source alone parses them for about 12 s; with the precompiled header
    about 2 s); where that fails, each source parses them itself."""
    cross = require_tool(CROSS)
    from torch.utils import cpp_extension

    includes = [*cpp_extension.include_paths(), sysconfig.get_paths()["include"]]
    selected = sorted({item.callspec.params["source"] for item in request.session.items
                       if getattr(item, "originalname", None) == "test_csrc_compiles_for_aarch64"})
    flags = ["-std=c++20", "-fopenmp", "-Wall", "-Werror", "-Wno-unused-function",
             "-Wno-maybe-uninitialized", "-I" + os.path.join(ROOT, "kernels"),
             "-I" + os.path.join(ROOT, "csrc"), *[f"-isystem{p}" for p in includes],
             "-DTORCH_EXTENSION_NAME=_C"]
    pch = tmp_path_factory.mktemp("aarch64_pch") / "torch_headers.h"
    pch.write_text("".join(f"#include <{h}>\n" for h in TORCH_HEADERS))
    built = subprocess.run([cross, "-x", "c++-header", *flags, str(pch), "-o", f"{pch}.gch"],
                           capture_output=True, text=True, timeout=600, check=False)
    pre = ["-include", str(pch)] if built.returncode == 0 else []

    def check(source: str) -> subprocess.CompletedProcess:
        return subprocess.run([cross, "-fsyntax-only", *flags, *pre,
                               os.path.join(ROOT, "csrc", source)],
                              capture_output=True, text=True, timeout=600, check=False)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        return dict(zip(selected, pool.map(check, selected)))


@pytest.mark.parametrize("source", SOURCES)
def test_csrc_compiles_for_aarch64(source, aarch64_syntax_checks):
    """Syntax and template instantiation of the extension's sources for aarch64, against the
    installed torch's headers (the same headers an aarch64 torch ships)."""
    result = aarch64_syntax_checks[source]
    assert result.returncode == 0, f"{source}: {result.stdout[-2000:]}{result.stderr[-4000:]}"
