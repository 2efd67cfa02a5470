"""TorchAir's own system tests run against op_sdk: how many of those that use only TorchAir's
public API and CPU tensors pass with ``torchair`` (and ``npugraph_ex``) resolved to op_sdk.

    python benchmarks/torchair_st.py --torchair PATH [--files NAME ...] [--alone] [--on-torchair]
                                     [--out FILE]

PATH is a checkout of TorchAir (Ascend/torchair); its ``tests/st/*_st.py`` run unchanged, one
pytest process per file, under ``op_sdk.as_torchair`` (the alias a user runs a TorchAir script
with). TorchAir's tests also import its internals (``torchair._ge_concrete_graph``,
``torchair.core._backend``, ...) and a fake NPU device (``_privateuse1_backend``, built by
TorchAir's CMake); op_sdk has neither. To tell those tests apart from op_sdk's gaps, this
script (never op_sdk itself) lets such imports succeed with placeholders that record every
use and raise when used. Each test is then one of:

* ``passed`` / ``failed`` / ``skipped``: it used no placeholder: it is in scope (TorchAir's
  public API on CPU tensors), and a failure is a gap of op_sdk's;
* ``internal``: it used one of TorchAir's internals (named in the results);
* ``npu``: it needs the NPU device (a tensor on ``npu``);
* ``ge``: its subject is TorchAir's GE engine itself (listed in GE_SUBJECT with the reason);
* ``not collected``: its file could not be imported (an internal used at import time).

A public name that a test imports from the internal module TorchAir defines it in (TorchAir's
``torchair.register_fx_node_ge_converter`` is ``torchair._ge_concrete_graph.fx2ge_converter``'s,
re-exported by ``torchair/__init__.py``) is the public name: the script reads TorchAir's public
modules' ``from <internal> import <name>`` lines for the names of its public-API allowlist
(``tests/st/allowlist_for_publicAPI.json``), resolves such an import to op_sdk's public name,
and lists it in the test's ``public_via_internal``.

``--alone`` runs each test in a process of its own instead of each file in one, which shows a
test whose outcome depends on what an earlier test of its file left behind. ``--on-torchair``
runs the same tests on TorchAir itself instead of op_sdk, to tell op_sdk's gaps from the
tests' own: the checkout's Python side (``python/torchair``) laid over the compiled modules of
torch_npu's wheel in the stub environment of tests/npu/torch_npu_env.py, with its two calls
into CANN's graph engine left out (tests/npu/real/torchair_export.py); nothing there reaches
ACL or GE, so a test that needs them fails there. Each test is then only passed / failed /
skipped.

Writes a JSON with the machine, the versions, the TorchAir commit, the command and every
test's class; prints the summary and the in-scope failures.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PLACEHOLDER_ERROR = "NotProvidedInOpSdk"
_NPU_WORDS = re.compile(r"\bnpu\b|privateuse1|PrivateUse1|torch_npu", re.I)


# -- the pytest plugin (loaded in each test process with -p torchair_st) ---------------------


class NotProvidedInOpSdk(RuntimeError):
    pass


TOUCHED: list[str] = []
VIA_INTERNAL: list[str] = []


class _Missing:
    """A name of TorchAir's internals: every use is recorded, and raises."""

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def _use(self, how: str):
        TOUCHED.append(self._name)
        raise NotProvidedInOpSdk(f"{self._name} ({how}): TorchAir internal, not in op_sdk")

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return _Missing(f"{self._name}.{attr}")

    def __setattr__(self, attr, value):  # unittest.mock.patch of an internal
        TOUCHED.append(f"{self._name}.{attr}")

    def __call__(self, *a, **k):
        self._use("called")

    def __iter__(self):
        self._use("iterated")

    def __getitem__(self, key):
        self._use("indexed")

    def __enter__(self):
        self._use("entered")

    def __exit__(self, *a):
        return False

    def __mro_entries__(self, bases):
        self._use("subclassed")

    def __instancecheck__(self, obj):
        self._use("isinstance")

    def __eq__(self, other):
        self._use("compared")

    __hash__ = object.__hash__


def _install_placeholders() -> None:
    if any(type(f).__name__ == "Finder" and type(f).__module__ == __name__ for f in sys.meta_path):
        return
    import importlib
    import importlib.abc
    import importlib.machinery
    import types

    from op_sdk import as_torchair

    reexports = json.loads(os.environ.get("TORCHAIR_ST_REEXPORTS", "{}"))

    class PlaceholderModule(types.ModuleType):
        def __getattr__(self, attr):
            if attr.startswith("__") and attr.endswith("__"):
                raise AttributeError(attr)
            name = f"{self.__name__}.{attr}"
            if name in reexports:  # a public name, imported from where TorchAir defines it
                public_module, public_name = reexports[name]
                VIA_INTERNAL.append(name)
                return getattr(importlib.import_module(public_module), public_name)
            return _Missing(name)

        def __setattr__(self, attr, value):  # unittest.mock.patch of an internal function
            # (not the import system binding a submodule to its package)
            if not (attr.startswith("__") and attr.endswith("__")) and not isinstance(
                    value, types.ModuleType):
                TOUCHED.append(f"{self.__name__}.{attr}")
            super().__setattr__(attr, value)

    class Loader(importlib.abc.Loader):
        def create_module(self, spec):
            module = PlaceholderModule(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    class Finder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            try:
                as_torchair.target(fullname)
            except ModuleNotFoundError:
                return importlib.machinery.ModuleSpec(fullname, Loader(), is_package=True)
            return None

    as_torchair.install()
    sys.meta_path.insert(0, Finder())
    sys.modules["_privateuse1_backend"] = _fake_device_module()


def _fake_device_module():
    """TorchAir's tests register a fake NPU device (a C++ extension) at import: here its two
    functions name torch's PrivateUse1 device, which has no kernels, so a test that puts a
    tensor on it fails with torch's PrivateUse1 error (classed ``npu``)."""
    import types

    import torch

    module = types.ModuleType("_privateuse1_backend")
    module.register_hook = lambda *a, **k: None
    module.npu_device = lambda *a, **k: torch.device("privateuseone", 0)
    return module


_RECORDS: dict[str, dict] = {}


def pytest_configure(config):
    if os.environ.get("TORCHAIR_ST_SUBJECT") == "torchair":
        _torchair_itself()
    else:
        _install_placeholders()


def _torchair_itself() -> None:
    """TorchAir (the one on the path) with its calls into CANN's graph engine left out."""
    import torch
    import torch_npu  # noqa: F401

    assert torch.npu.is_available() is False, "a device is visible: refusing to run"
    from tests.npu.real.torchair_export import exporter

    exporter()


def pytest_runtest_setup(item):
    TOUCHED.clear()


def pytest_runtest_makereport(item, call):
    record = _RECORDS.setdefault(item.nodeid, {"outcome": "passed", "touched": [], "error": "",
                                               "public_via_internal": []})
    for name in VIA_INTERNAL:  # (imports at module level: recorded for every test of the file)
        if name not in record["public_via_internal"]:
            record["public_via_internal"].append(name)
    if call.excinfo is not None and record["outcome"] == "passed":
        if call.excinfo.errisinstance(__import__("pytest").skip.Exception):
            record["outcome"] = "skipped"
        else:
            record["outcome"] = "failed"
            text = call.excinfo.exconly()
            record["error"] = text.strip().splitlines()[0][:300] if text.strip() else ""
    for name in TOUCHED:
        if name not in record["touched"]:
            record["touched"].append(name)


def pytest_sessionfinish(session):
    out = os.environ.get("TORCHAIR_ST_RECORDS")
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(_RECORDS, f)


# -- the driver -------------------------------------------------------------------------------


def _tests_in(path: str) -> list[str]:
    """The test ids of a file, from its source (for a file that cannot be collected)."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    ids = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            ids += [f"{os.path.basename(path)}::{node.name}::{f.name}" for f in node.body
                    if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name.startswith("test")]
    return ids


# a failure that names one of TorchAir's internals: a placeholder used in a class set-up
# (pytest reports its error again for each test of the class), or a private attribute of a
# torchair module or of a registered operator (TorchAir's ``_ge_converter``)
_INTERNAL_WORDS = re.compile(PLACEHOLDER_ERROR + r"|has no attribute '_\w+'")

# tests whose subject is TorchAir's GE engine itself, with the reason (they use only public
# names, so the placeholders do not tell them apart)
GE_SUBJECT = {
    "torchair_debug_log_st.py::TestLogDebug::test_torch_compile_ge_debug_is_1":
        "checks TORCH_COMPILE_DEBUG's files of TorchAir's GE passes and its C++ logs",
    "torchair_debug_log_st.py::TestLogDebug::test_torch_cache_compile_debug_is_1":
        "checks TORCH_COMPILE_DEBUG's files of TorchAir's GE passes and its C++ logs",
}


def public_reexports(torchair: str) -> dict[str, tuple[str, str]]:
    """{internal module.name: (public module, name)} for each name of TorchAir's public-API
    allowlist that a public module of the checkout imports from an internal module (the
    public name is that object, or a wrapper of it with its signature)."""
    allow_path = os.path.join(torchair, "tests", "st", "allowlist_for_publicAPI.json")
    if not os.path.exists(allow_path):
        return {}
    with open(allow_path, encoding="utf-8") as f:
        allowlist = json.load(f)
    found: dict[str, tuple[str, str]] = {}
    for public_module, names in allowlist.items():
        init = os.path.join(torchair, "python", *public_module.split("."), "__init__.py")
        if not os.path.exists(init):
            continue
        with open(init, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                    and any(part.startswith("_") for part in node.module.split(".")):
                for alias in node.names:
                    if alias.name in names:
                        found[f"{node.module}.{alias.name}"] = (public_module, alias.name)
    return found


def classify(test_id: str, record: dict) -> str:
    if test_id in GE_SUBJECT:
        return "ge"
    if record["touched"]:
        real = [t for t in record["touched"] if not t.startswith("_privateuse1_backend")]
        return "internal" if real else "npu"
    if record["outcome"] == "failed":
        if _INTERNAL_WORDS.search(record["error"]):
            return "internal"
        if _NPU_WORDS.search(record["error"]):
            return "npu"
    return record["outcome"]


SITECUSTOMIZE = """import os
if os.environ.get("TORCHAIR_ST_RECORDS"):
    import torchair_st
    torchair_st._install_placeholders()
"""


def torchair_environ(torchair: str, work: str) -> dict[str, str]:
    """The environment of a process that runs TorchAir itself: torch_npu's wheel with the
    stub CANN libraries, its ``torch_npu/dynamo/torchair`` replaced by the checkout's
    ``python/torchair`` (Python files) beside the wheel's compiled modules (the rest of the
    wheel is linked, not copied)."""
    sys.path.insert(0, os.path.dirname(HERE))
    from tests.npu.torch_npu_env import prepare

    env, why = prepare()
    if env is None:
        raise SystemExit(f"--on-torchair: {why}")
    site = os.path.join(work, "site")

    def link_all_but(src: str, dst: str, keep: str) -> None:
        os.makedirs(dst)
        for name in os.listdir(src):
            if name != keep:
                os.symlink(os.path.join(src, name), os.path.join(dst, name))

    link_all_but(env.site, site, "torch_npu")
    link_all_but(os.path.join(env.site, "torch_npu"), os.path.join(site, "torch_npu"), "dynamo")
    link_all_but(os.path.join(env.site, "torch_npu", "dynamo"), os.path.join(site, "torch_npu", "dynamo"),
                 "torchair")
    wheel = os.path.join(env.site, "torch_npu", "dynamo", "torchair")
    overlay = os.path.join(site, "torch_npu", "dynamo", "torchair")
    for root, _, names in os.walk(os.path.join(torchair, "python", "torchair")):
        rel = os.path.relpath(root, os.path.join(torchair, "python", "torchair"))
        os.makedirs(os.path.join(overlay, rel), exist_ok=True)
        for name in names:
            if name.endswith(".py"):
                os.symlink(os.path.join(root, name), os.path.join(overlay, rel, name))
    for root, _, names in os.walk(wheel):
        for name in names:
            if ".so" in name:
                rel = os.path.relpath(root, wheel)
                os.makedirs(os.path.join(overlay, rel), exist_ok=True)
                os.symlink(os.path.join(root, name), os.path.join(overlay, rel, name))
    environ = env.environ()
    environ["PYTHONPATH"] = environ["PYTHONPATH"].replace(env.site, site, 1)
    environ["TORCHAIR_ST_SUBJECT"] = "torchair"
    return environ


def run_file(path: str, timeout: int, reexports: dict, base_env: dict | None = None,
             node: str = "") -> tuple[dict[str, dict], str]:
    """Runs one test file (or one test of it, ``node``) in a pytest process: on op_sdk, or on
    TorchAir itself when ``base_env`` is torchair_environ's."""
    with tempfile.TemporaryDirectory() as tmp:
        records = os.path.join(tmp, "records.json")
        if base_env is None:
            with open(os.path.join(tmp, "sitecustomize.py"), "w", encoding="utf-8") as f:
                # the Python processes a test starts (torch.multiprocessing.spawn's workers)
                # get the alias and the placeholders too (their uses are not recorded: a
                # worker that uses an internal fails, and so does its test)
                f.write(SITECUSTOMIZE)
        base = base_env if base_env is not None else os.environ
        env = dict(base, TORCHAIR_ST_RECORDS=records, TORCHAIR_ST_REEXPORTS=json.dumps(reexports),
                   PYTHONPATH=os.pathsep.join([tmp, HERE, os.path.dirname(HERE), os.path.dirname(path),
                                               base.get("PYTHONPATH", "")]))  # this checkout's op_sdk
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "torchair_st",
               "-o", "python_files=*_st.py", "-o", "addopts=", "-W", "ignore",
               path + (f"::{node}" if node else "")]
        try:
            proc = subprocess.run(cmd, env=env, cwd=tmp, capture_output=True, text=True,
                                  timeout=timeout)
            tail = (proc.stdout + proc.stderr)[-3000:]
        except subprocess.TimeoutExpired:
            return {}, f"timed out after {timeout} s"
        if not os.path.exists(records):
            return {}, tail
        with open(records, encoding="utf-8") as f:
            return json.load(f), tail


def _git_commit(repo: str) -> str:
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--torchair", required=True, help="a checkout of Ascend/torchair")
    parser.add_argument("--files", nargs="*", help="test files (names under tests/st) to run")
    parser.add_argument("--timeout", type=int, default=900, help="seconds per file")
    parser.add_argument("--alone", action="store_true", help="each test in a process of its own")
    parser.add_argument("--on-torchair", action="store_true",
                        help="run the tests on TorchAir itself (GE left out), not on op_sdk")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "torchair_st.json"))
    args = parser.parse_args()

    st = os.path.join(args.torchair, "tests", "st")
    names = args.files or sorted(n for n in os.listdir(st) if n.endswith("_st.py"))
    tests: dict[str, dict] = {}
    files: dict[str, str] = {}
    reexports = public_reexports(args.torchair)
    work = tempfile.TemporaryDirectory()
    base_env = torchair_environ(os.path.abspath(args.torchair), work.name) if args.on_torchair else None
    for name in names:
        path = os.path.join(st, name)
        declared = _tests_in(path)
        if args.alone:
            records, tail = {}, ""
            for test_id in declared:
                one, tail = run_file(path, args.timeout, reexports, base_env,
                                     test_id.split("::", 1)[1])
                records.update(one)
        else:
            records, tail = run_file(path, args.timeout, reexports, base_env)
        for test_id in declared:
            record = next((r for k, r in records.items() if k.endswith(test_id)), None)
            if record is None:
                tests[test_id] = {"class": "not collected"}
            else:
                cls = record["outcome"] if args.on_torchair else classify(test_id, record)
                tests[test_id] = {"class": cls, **record}
        collected = sum(1 for t in declared if tests[t]["class"] != "not collected")
        files[name] = "collected" if collected else (
            re.findall(r"^E   ([\w.]+: .*)$", tail, re.M)
            or [tail.strip().splitlines()[-1] if tail.strip() else ""])[0][:300]
        print(f"{name}: {collected}/{len(declared)} collected", flush=True)

    counts: dict[str, int] = {}
    for t in tests.values():
        counts[t["class"]] = counts.get(t["class"], 0) + 1
    in_scope = counts.get("passed", 0) + counts.get("failed", 0)
    from op_sdk.app.machine import machine_facts
    import torch

    import op_sdk

    result = {
        "command": " ".join(["python", "benchmarks/torchair_st.py"] + sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": machine_facts(),
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "op_sdk": op_sdk.__version__},
        "torchair_commit": _git_commit(args.torchair),
        "subject": "TorchAir itself (GE left out)" if args.on_torchair else "op_sdk",
        "alone": args.alone,
        "summary": {"tests": len(tests), **counts} if args.on_torchair else {
            "tests": len(tests), **counts, "in_scope": in_scope, "in_scope_passed": counts.get("passed", 0)},
        "files": files,
        "tests": tests,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, sort_keys=False)
    print(json.dumps(result["summary"]))
    for test_id, t in tests.items():
        if t["class"] == "failed":
            print(f"FAILED {test_id}: {t['error']}")


if __name__ == "__main__":
    main()
