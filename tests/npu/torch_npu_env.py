"""A real torch_npu on a machine without an NPU: the ``torch-npu`` wheel, installed without
its dependencies into a directory of its own, and no-op stand-ins for the CANN shared
libraries it links against, so that ``import torch_npu`` runs on x86.

That gives the real torch_npu registry (schemas, Meta kernels, the C++ signatures of its
kernels), its headers and TorchAir's Python side. Nothing in such a process may reach ACL
or GE: every stub function returns 0 and touches no argument. Processes that use it assert
``torch.npu.is_available()`` is False before anything else.

Usage: ``env = prepare()`` (None plus a reason when the wheel cannot be had), then run a
subprocess with ``env.environ()``. ``python tests/npu/torch_npu_env.py`` prepares the
environment and prints where it is.
"""

from __future__ import annotations

import dataclasses
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig

TORCH_NPU_VERSION = "2.13.0"

# Libraries whose symbols a stub must never define: what the loader already finds.
_SYSTEM_LIBS = ("libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "libpthread.so.0",
                "libdl.so.2", "librt.so.1", "ld-linux-x86-64.so.2")


def cache_root() -> str:
    return os.environ.get("OP_SDK_TORCH_NPU_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "op_sdk",
                                       f"torch_npu-{TORCH_NPU_VERSION}"))


@dataclasses.dataclass
class TorchNpuEnv:
    site: str      # holds torch_npu/ and its dist-info (torch's backend autoload finds it)
    stubs: str     # the stub CANN libraries
    sonames: list[str]
    symbols: int

    @property
    def include_dirs(self) -> list[str]:
        return [os.path.join(self.site, "torch_npu", "include")]

    def environ(self, extra_path: list[str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        path = [self.site] + list(extra_path or [])
        if env.get("PYTHONPATH"):
            path.append(env["PYTHONPATH"])
        env["PYTHONPATH"] = os.pathsep.join(path)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            [self.stubs] + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else []))
        # torch_npu reads these at import; point them at nothing rather than at a host's CANN.
        env.pop("ASCEND_HOME_PATH", None)
        env.pop("ASCEND_OPP_PATH", None)
        return env


def _readelf(args: list[str], path: str) -> str:
    return subprocess.run(["readelf", "-W", *args, path], capture_output=True, text=True,
                          check=True).stdout


def _needed(path: str) -> list[str]:
    return re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", _readelf(["-d"], path))


def _dynsyms(path: str) -> tuple[set[str], set[str], set[str]]:
    """(defined, undefined, undefined data) global dynamic symbols of one ELF file,
    versions stripped."""
    defined, undefined, objects = set(), set(), set()
    for line in _readelf(["--dyn-syms"], path).splitlines():
        cols = line.split()
        if len(cols) < 8 or not cols[0].endswith(":") or cols[4] == "LOCAL":
            continue
        name = cols[7].split("@")[0]
        (undefined if cols[6] == "UND" else defined).add(name)
        if cols[6] == "UND" and cols[3] == "OBJECT":
            objects.add(name)
    return defined, undefined, objects


_LDCONFIG: list[str] = []


def _system_lib(soname: str) -> str | None:
    if not _LDCONFIG:
        _LDCONFIG.append(subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout)
    m = re.search(rf"^\s*{re.escape(soname)} \(.*x86-64.*\) => (\S+)$", _LDCONFIG[0], re.M)
    return m.group(1) if m else None


def announce(message: str) -> None:
    """Say on the terminal, past pytest's capture, what the tests fetch and where."""
    sys.__stderr__.write(f"\nop_sdk tests: {message}\n")
    sys.__stderr__.flush()


def _download_wheel(dest: str) -> str:
    os.makedirs(dest, exist_ok=True)
    found = glob.glob(os.path.join(dest, f"torch_npu-{TORCH_NPU_VERSION}-*.whl"))
    if not found:
        announce(f"downloading the torch-npu=={TORCH_NPU_VERSION} wheel (about 44 MB, 169 MB "
                 f"unpacked) into {os.path.dirname(dest)} for the real-torch_npu checks, once")
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
                        "--disable-pip-version-check", "--only-binary=:all:",
                        f"torch-npu=={TORCH_NPU_VERSION}", "-d", dest],
                       check=True, capture_output=True, text=True, timeout=600)
        found = glob.glob(os.path.join(dest, f"torch_npu-{TORCH_NPU_VERSION}-*.whl"))
    if not found:
        raise RuntimeError(f"pip download gave no torch_npu-{TORCH_NPU_VERSION} wheel")
    return found[0]


def _write_stub_source(path: str, symbols: list[str], objects: set[str]) -> None:
    lines = ["/* no-op stand-ins for CANN symbols: functions return 0, data is zeroed */"]
    for i, name in enumerate(symbols):
        if name in objects:
            lines.append(f'char opsdk_stub_d{i}[256] __asm__("{name}") __attribute__((aligned(64)));')
        else:
            lines.append(f'long opsdk_stub_f{i}(void) __asm__("{name}");')
            lines.append(f"long opsdk_stub_f{i}(void) {{ return 0; }}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def _build_stubs(site: str, stubs: str) -> tuple[list[str], int]:
    import torch

    torch_lib = os.path.join(os.path.dirname(torch.__file__), "lib")
    ours = [p for p in glob.glob(os.path.join(site, "torch_npu", "**", "*.so*"), recursive=True)
            if not p.endswith(".a")]
    local = {os.path.basename(p): p for p in ours}
    local.update({os.path.basename(p): p for p in glob.glob(os.path.join(torch_lib, "*.so*"))})
    libpython = os.path.join(sysconfig.get_config_var("LIBDIR") or "",
                             sysconfig.get_config_var("LDLIBRARY") or "")

    missing: set[str] = set()
    defined: set[str] = set()
    undefined: set[str] = set()
    objects: set[str] = set()
    for path in ours:
        for soname in _needed(path):
            if soname not in local and _system_lib(soname) is None:
                missing.add(soname)
        d, u, o = _dynsyms(path)
        defined |= d
        undefined |= u
        objects |= o
    providers = [p for p in local.values() if p not in ours]
    providers += [p for p in (_system_lib(s) for s in _SYSTEM_LIBS) if p]
    if os.path.exists(libpython):
        providers.append(libpython)
    providers.append(os.path.realpath(sys.executable))
    for path in providers:
        defined |= _dynsyms(path)[0]
    symbols = sorted(s for s in undefined - defined if s and not s.startswith(("Py", "_Py")))

    os.makedirs(stubs, exist_ok=True)
    source = os.path.join(stubs, "cann_stubs.c")
    _write_stub_source(source, symbols, objects)
    cc = os.environ.get("CC", "cc")
    for soname in sorted(missing):
        subprocess.run([cc, "-shared", "-fPIC", "-O0", f"-Wl,-soname,{soname}", source, "-o",
                        os.path.join(stubs, soname)], check=True, capture_output=True, text=True)
    return sorted(missing), len(symbols)


def prepare(root: str | None = None) -> tuple[TorchNpuEnv | None, str]:
    """Build (once, cached) the stubbed torch_npu environment. Returns (env, "") or
    (None, reason) when the wheel cannot be downloaded."""
    root = root or cache_root()
    site, stubs = os.path.join(root, "site"), os.path.join(root, "stubs")
    marker = os.path.join(root, "ready")
    recipe = fingerprint()
    if not os.path.exists(marker) or open(marker).readline().split()[-1:] != [recipe]:
        try:
            wheel = _download_wheel(os.path.join(root, "wheel"))
        except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            return None, (f"torch-npu=={TORCH_NPU_VERSION} could not be downloaded from the "
                          f"package registry: {detail.strip()[-500:]}")
        shutil.rmtree(site, ignore_errors=True)
        shutil.rmtree(stubs, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet",
                        "--disable-pip-version-check", "--no-compile", "--target", site, wheel],
                       check=True, capture_output=True, text=True, timeout=600)
        sonames, count = _build_stubs(site, stubs)
        with open(marker, "w") as f:
            f.write("\n".join([f"symbols {count} recipe {recipe}", *sonames]) + "\n")
    lines = open(marker).read().split("\n")
    count = int(lines[0].split()[1])
    return TorchNpuEnv(site, stubs, [s for s in lines[1:] if s], count), ""


def fingerprint() -> str:
    """Identifies this module's environment recipe (a new recipe rebuilds the cache)."""
    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


if __name__ == "__main__":
    env, why = prepare()
    if env is None:
        sys.exit(why)
    print(f"site:  {env.site}\nstubs: {env.stubs} ({', '.join(env.sonames)}; "
          f"{env.symbols} symbols)")
