"""Builds binding sources (csrc/npu/) against the torch_npu wheel's headers for the tests,
with op_sdk.npu.build.compile_command, and caches each outcome (the library, or the
compiler's errors) under ~/.cache/op_sdk/npu_bindings/<hash>/, keyed by the source, the
shared header, the command and the torch / torch_npu versions, so a test run compiles only
what changed."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import hashlib
import json
import os
import subprocess

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


def build(name: str, source_text: str, torch_npu_dir: str) -> Build:
    import torch

    probe = nbuild.compile_command("SOURCE", "OUTPUT", torch_npu_dir)
    key = hashlib.sha256()
    for part in (source_text, open(os.path.join(nbuild.SOURCE_DIR, "binding.h")).read(),
                 json.dumps(probe), torch.__version__, torch_npu_dir):
        key.update(part.encode())
    folder = os.path.join(cache_root(), f"{name}-{key.hexdigest()[:16]}")
    library = os.path.join(folder, f"{name}.so")
    result = os.path.join(folder, "result.json")
    if not os.path.exists(result):
        os.makedirs(folder, exist_ok=True)
        source = os.path.join(folder, f"{name}.cpp")
        with open(source, "w") as f:
            f.write(source_text)
        out = subprocess.run(nbuild.compile_command(source, library + ".tmp", torch_npu_dir),
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
