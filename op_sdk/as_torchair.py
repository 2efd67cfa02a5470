"""Run a TorchAir script unchanged: ``import torchair`` / ``import npugraph_ex`` resolved to op_sdk.

    python -m op_sdk.as_torchair script.py [args...]
    python -m op_sdk.as_torchair -m module [args...]      (e.g. -m pytest tests/)

or, in a program, ``op_sdk.as_torchair.install()`` before the first ``import torchair``.
The command also resolves the names in the Python processes the script starts
(torch.multiprocessing.spawn's workers, a ``subprocess`` running Python): it puts
op_sdk/_alias on their PYTHONPATH; ``install()`` changes this process only.

The names resolve to what docs/torchair.md lists: ``torchair`` is op_sdk, ``torchair.<name>``
op_sdk's module of that name (``torchair.ge``, ``torchair.inference``, ``torchair.scope``,
...), ``npugraph_ex`` is op_sdk.npugraph_ex; and the two module paths TorchAir's own
documentation imports from, ``torchair.configs.compiler_config`` (CompilerConfig) and
``torchair.core.utils`` (logger), with their npugraph_ex twins. Any other ``torchair.*``
module (TorchAir's internals: ``torchair._ge_concrete_graph``, ...) raises
ModuleNotFoundError naming it. The alias is opt-in: it is never installed at ``import
op_sdk``, and once installed it shadows a real TorchAir (torch_npu's) in this process.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import runpy
import sys
import types

__all__ = ["install", "installed", "main"]

_ROOTS = {"torchair": "op_sdk", "npugraph_ex": "op_sdk.npugraph_ex"}


def _compiler_config(root: str) -> types.ModuleType:
    if root == "torchair":
        from op_sdk.compiler.config import CompilerConfig
    else:
        from op_sdk.compiler.npugraph_ex import CompilerConfig
    return _namespace(f"{root}.configs.compiler_config", CompilerConfig=CompilerConfig)


def _core_utils(root: str) -> types.ModuleType:
    return _namespace(f"{root}.core.utils", logger=logging.getLogger("op_sdk"))  # op_sdk.logger


# module paths of TorchAir's documentation that op_sdk keeps elsewhere: (root, rest) -> maker
_DOCUMENTED = {
    "configs": lambda root: _namespace(f"{root}.configs"),
    "configs.compiler_config": _compiler_config,
    "core": lambda root: _namespace(f"{root}.core"),
    "core.utils": _core_utils,
}
# npugraph_ex's submodules that are op_sdk's top-level modules
_NPUGRAPH_EX_SHARED = {"scope": "op_sdk.scope", "ops": "op_sdk.ops"}


def _namespace(name: str, **attrs) -> types.ModuleType:
    module = types.ModuleType(name, f"op_sdk's stand-in for TorchAir's {name}")
    module.__dict__.update(attrs)
    return module


def target(fullname: str) -> str | types.ModuleType | None:
    """What an aliased module name resolves to: an op_sdk module name, a stand-in module,
    or None when the name is not aliased. Raises ModuleNotFoundError for an aliased name
    op_sdk has nothing for."""
    root, _, rest = fullname.partition(".")
    if root not in _ROOTS:
        return None
    if not rest:
        return _ROOTS[root]
    if rest in _DOCUMENTED:
        return _DOCUMENTED[rest](root)
    if root == "npugraph_ex" and rest in _NPUGRAPH_EX_SHARED:
        return _NPUGRAPH_EX_SHARED[rest]
    candidate = f"{_ROOTS[root]}.{rest}"
    if not any(part.startswith("_") for part in rest.split(".")):
        try:
            if importlib.util.find_spec(candidate) is not None:
                return candidate
        except ModuleNotFoundError:
            pass
    raise ModuleNotFoundError(
        f"No module named {fullname!r}: op_sdk, standing in for TorchAir, has no module of "
        f"this name (docs/torchair.md lists TorchAir's public names it provides)",
        name=fullname)


class _Loader(importlib.abc.Loader):
    def __init__(self, module: types.ModuleType):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module) -> None:
        pass  # the op_sdk module is imported already


class _AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target_module=None):
        resolved = target(fullname)
        if resolved is None:
            return None
        module = importlib.import_module(resolved) if isinstance(resolved, str) else resolved
        return importlib.machinery.ModuleSpec(fullname, _Loader(module), is_package=True)


_FINDER = _AliasFinder()


def installed() -> bool:
    return _FINDER in sys.meta_path


def install() -> None:
    """Resolve ``torchair`` / ``npugraph_ex`` imports to op_sdk in this process. Refuses
    (RuntimeError) when a real TorchAir is imported already."""
    for root, module in _ROOTS.items():
        loaded = sys.modules.get(root)
        if loaded is not None and getattr(loaded, "__name__", root) != module:
            raise RuntimeError(f"op_sdk.as_torchair.install(): {root!r} is imported already "
                               f"({getattr(loaded, '__file__', loaded)}); install the alias "
                               f"before the first import of {root}")
    if not installed():
        sys.meta_path.insert(0, _FINDER)
    from op_sdk.compiler import collectives

    collectives.install()  # what importing TorchAir does: send / recv / ... traceable


# put on PYTHONPATH by main(), for the processes the script starts (op_sdk._alias)
STAND_IN_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_alias")


def _replace_stand_in(name: str) -> None:
    """Called by op_sdk._alias's ``torchair`` / ``npugraph_ex`` packages when a process
    imports them from STAND_IN_PATH: install the alias and put op_sdk's module in their
    place (the import statement returns what sys.modules then holds)."""
    if name not in _ROOTS:  # imported as op_sdk._alias.<name>: nothing to stand for
        return
    del sys.modules[name]
    install()
    sys.modules[name] = importlib.import_module(name)


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m op_sdk.as_torchair (script.py | -m module) [args...]"
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.split("\n\n", 2)[1] if args else usage)
        raise SystemExit(0 if args else 2)
    install()
    # the processes the script starts resolve the names too (a Python subprocess reads
    # PYTHONPATH; multiprocessing's spawned workers start with this process's sys.path)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (STAND_IN_PATH, os.environ.get("PYTHONPATH")) if p)
    sys.path.append(STAND_IN_PATH)  # (here the alias resolves the names first)
    if args[0] == "-m":
        if len(args) < 2:
            raise SystemExit(usage)
        sys.argv = args[1:]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = args
        sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
        runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
