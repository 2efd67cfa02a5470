"""Builds binding sources (csrc/npu/) against the torch_npu wheel's headers for the tests,
with op_sdk.npu.build.compile_command, and caches each outcome (the library, or the
compiler's errors) under ~/.cache/op_sdk/npu_bindings/<hash>/, keyed by the source, the
shared header, the command and the torch / torch_npu versions, so a test run compiles only
what changed.

Every binding's first include is the shared header binding.h (torch's and op-plugin's
headers: most of a binding's compile time), so the harness precompiles it once with the
bindings' own flags (``pch_dir``) and each compile reads that instead of parsing it again
(about 4 s a binding instead of 16 here). Where the precompiled header cannot be built or
used the compiler parses the header itself: the same library, only slower."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import threading

from op_sdk.npu import build as nbuild


def cache_root() -> str:
    return os.environ.get("OP_SDK_BINDING_CACHE",
                          os.path.join(os.path.expanduser("~"), ".cache", "op_sdk", "npu_bindings"))


@dataclasses.dataclass
class Build:
    name: str
    ok: bool
    library: str   # the built library (when ok)
    errors: str    # the compiler's diagnostics (when not)


def _key(*parts: str) -> str:
    import torch

    key = hashlib.sha256()
    for part in (*parts, open(os.path.join(nbuild.SOURCE_DIR, "binding.h")).read(),
                 torch.__version__):
        key.update(part.encode())
    return key.hexdigest()[:16]


_PCH_LOCK = threading.Lock()


def pch_dir(torch_npu_dir: str) -> str | None:
    """The folder holding binding.h.gch, binding.h precompiled with the bindings' flags
    (built once per header / command / versions, older ones removed), or None where it
    cannot be built. Put before csrc/npu on the include path, the compiler finds the
    precompiled header where it would look for binding.h."""
    probe = nbuild.compile_command("SOURCE", "OUTPUT", torch_npu_dir)
    folder = os.path.join(cache_root(), f"pch-{_key(json.dumps(probe), torch_npu_dir)}")
    done = os.path.join(folder, "ok")
    with _PCH_LOCK:
        if not os.path.exists(done):
            for old in os.listdir(cache_root()) if os.path.isdir(cache_root()) else ():
                if old.startswith("pch-"):
                    shutil.rmtree(os.path.join(cache_root(), old), ignore_errors=True)
            os.makedirs(folder, exist_ok=True)
            wrapper = os.path.join(folder, "pch.h")  # (binding.h itself would be the main
            with open(wrapper, "w") as f:           # file, where #pragma once warns)
                f.write(f'#include "{os.path.join(nbuild.SOURCE_DIR, "binding.h")}"\n')
            flags = [a for a in probe[1:probe.index("SOURCE")] if a != "-shared"]
            out = subprocess.run([probe[0], "-x", "c++-header", *flags, wrapper, "-o",
                                  os.path.join(folder, "binding.h.gch")],
                                 capture_output=True, text=True, timeout=600)
            with open(done, "w") as f:
                f.write("ok" if out.returncode == 0 else out.stderr[-4000:])
        with open(done) as f:
            return folder if f.read() == "ok" else None


def _command(source: str, output: str, torch_npu_dir: str) -> list[str]:
    cmd = nbuild.compile_command(source, output, torch_npu_dir)
    pch = pch_dir(torch_npu_dir)
    if pch is not None:
        cmd.insert(cmd.index(f"-I{nbuild.SOURCE_DIR}"), f"-I{pch}")
    return cmd


def build(name: str, source_text: str, torch_npu_dir: str) -> Build:
    probe = _command("SOURCE", "OUTPUT", torch_npu_dir)
    folder = os.path.join(cache_root(), f"{name}-{_key(source_text, json.dumps(probe), torch_npu_dir)}")
    library = os.path.join(folder, f"{name}.so")
    result = os.path.join(folder, "result.json")
    if not os.path.exists(result):
        os.makedirs(folder, exist_ok=True)
        source = os.path.join(folder, f"{name}.cpp")  # (not beside binding.h: the compiler
        with open(source, "w") as f:                  # looks in the source's folder first)
            f.write(source_text)
        out = subprocess.run(_command(source, library + ".tmp", torch_npu_dir),
                             capture_output=True, text=True, timeout=600)
        if out.returncode == 0:
            os.replace(library + ".tmp", library)
        with open(result + ".tmp", "w") as f:
            json.dump({"ok": out.returncode == 0, "errors": out.stderr[-20000:]}, f)
        os.replace(result + ".tmp", result)
    with open(result) as f:
        data = json.load(f)
    return Build(name, data["ok"], library, data["errors"])


def build_all(items: dict[str, str], torch_npu_dir: str, jobs: int = 2) -> dict[str, Build]:
    """{name: source text} -> {name: Build}, compiled ``jobs`` at a time."""
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {name: pool.submit(build, name, text, torch_npu_dir) for name, text in items.items()}
        return {name: f.result() for name, f in futures.items()}


_SETUP_PROBE = r"""
import json, runpy, setuptools
captured = {}
setuptools.setup = lambda **kw: captured.update(kw)
runpy.run_path("setup.py", run_name="__main__")
print("EXTENSIONS=" + json.dumps([[e.name, e.sources, dict(e.define_macros)] for e in captured["ext_modules"]]))
"""


def setup_extensions(root: str, env: dict | None = None) -> list:
    """[name, sources, macros] of each extension setup.py would build in this environment
    (setup() replaced by a recorder: nothing is compiled)."""
    import sys

    out = subprocess.run([sys.executable, "-c", _SETUP_PROBE], cwd=root, capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-4000:]
    line = next(x for x in out.stdout.splitlines() if x.startswith("EXTENSIONS="))
    return json.loads(line[len("EXTENSIONS="):])
