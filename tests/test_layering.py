"""Imports run one way (docs/architecture.md, "Layers"): every import of every module of
op_sdk/, module-level or inside a function, goes to its own package or to a package of a
lower layer of the table in docs/architecture.md, and no modules import each other in a
circle."""

from __future__ import annotations

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "op_sdk")


def _layers() -> dict[str, int]:
    text = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    table = text.split("<!-- layers -->")[1].split("<!-- end:layers -->")[0]
    layers = {}
    for row in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        for name in re.findall(r"`([\w.]+)`", cells[1]):
            layers[name] = int(cells[0])
    return layers


def _modules() -> dict[str, str]:
    """{dotted module name: path} of every module of op_sdk/."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(folder, f)
                name = os.path.relpath(path[:-3], ROOT).replace(os.sep, ".")
                out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: str, modules: dict[str, str]) -> set[str]:
    """The op_sdk modules ``name`` imports (``from a import b`` counts as a.b where a.b is a
    module, else as a)."""
    is_package = path.endswith("__init__.py")
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in modules else module
                       for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "op_sdk"


GRAPH = {name: _imports(name, path, _modules()) for name, path in _modules().items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_package_has_a_layer():
    layers = _layers()
    missing = sorted({_package(m) for m in GRAPH} - set(layers))
    assert not missing, f"packages of op_sdk/ not in docs/architecture.md's layer table: {missing}"


def test_no_import_circle():
    assert not _cycles(GRAPH), _cycles(GRAPH)


def test_imports_go_to_lower_layers_only():
    layers = _layers()
    upward = sorted(f"{a} ({layers[_package(a)]}) imports {b} ({layers[_package(b)]})"
                    for a, targets in GRAPH.items() for b in targets
                    if _package(a) != _package(b) and layers[_package(b)] >= layers[_package(a)])
    assert not upward, "\n".join(upward)


@pytest.mark.parametrize("graph, want", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_circle_check_finds_circles(graph, want):
    assert _cycles(graph) == want


def test_the_import_reader_sees_function_level_imports(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("def f():\n    from op_sdk.compiler import backend\n    import op_sdk.library\n")
    assert _imports("op_sdk.x", str(path), _modules()) == {"op_sdk.compiler.backend",
                                                           "op_sdk.library"}
