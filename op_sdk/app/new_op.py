"""``op-sdk new-op NAME --schema "..."``: a new operator slice, written from templates
(op_sdk/app/templates/new_op/, jinja2) in exactly the layout op_sdk's own operators use
(CONTRIBUTING.md), as a starting point that builds and passes its tests before any edit.

* ``--in-tree``: in op_sdk's source tree, a built-in slice (package ``op_sdk``). It writes
  only the slice's own files, then regenerates the generated docs (``op-sdk docs``);
  deleting the files and regenerating the docs leaves the tree as it was.
* otherwise: a user project (``--out DIR``, package ``--package``, default the namespace)
  in the same layout, built against the installed op_sdk; a second ``new-op`` into the same
  project adds a slice beside the first.

The slice's files (``<pkg>`` is ``op_sdk`` in the tree):

* ``<pkg>/ops/<slice>.py``: schema, checks, reference, fake, the aclnn prototype and the
  OpPlugin binding's declaration (``aclnn=``); for an in-place schema (``Tensor(a!)``) its
  functional twin too (``functional=``);
* ``<pkg>/converters/<slice>.py``: the Ascend IR prototype (``ir.declare``) and the GE
  converter; ``<pkg>/onnx/<slice>.py``: the ONNX translation (custom node + composite);
* ``csrc/npu/<operator>.cpp``: the OpPlugin binding, generated from the declaration by
  ``op_sdk.npu.binding`` (the generator of the built-in bindings);
* ``kernels/ascendc/<slice>/``: the Ascend C kernel in CANN's layout (op_host tiling / def /
  infershape, op_kernel, op_graph prototype);
* ``tests/ops/test_<slice>.py``: the slice's own tests and, in the tree, the tables op_sdk's
  registry-wide tests read (samples, constraint cases, GE types); ``tests/ascendc/driver_<slice>.cpp`` and
  ``tests/ascendc/test_<slice>_kernel.py``: the Ascend C kernel on the CPU model.

From the schema alone op_sdk cannot know what the operator computes, so every deliverable
starts from the one computation every schema can have: each output a copy of the first
tensor input. The author replaces it, the reference first, and the tests keep the
deliverables in agreement.
"""

from __future__ import annotations

import keyword
import os
import re
import sys
import textwrap

import torch

__all__ = ["plan", "render", "write", "find_tree", "regenerate_docs", "NewOpError"]

TEMPLATES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates", "new_op")
# the argument types the templates write (schema -> IR attribute type, OpDef attribute,
# sample value); any other is refused by name
_ATTRS = {"float": ("Float", "0.5"), "int": ("Int", "1"), "bool": ("Bool", "False"),
          "int[]": ("ListInt", "[1]"), "str": ("String", "'a'")}
_ACLNN_CTYPES = {"Float": "double", "Int": "int64_t", "Bool": "bool", "ListInt": "aclIntArray*",
                 "String": "char*"}


class NewOpError(ValueError):
    pass


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.strip("_").split("_") if p)


def _lower_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest)


def _type(arg) -> str:
    """The schema language's spelling of an argument's type (Tensor?, int[], ...)."""
    t = arg.type
    opt = isinstance(t, torch.OptionalType)
    if opt:
        t = t.getElementType()
    text = {"List[int]": "int[]"}.get(str(t), str(t))
    return text + ("?" if opt else "")


def find_tree(start: str | None = None) -> str | None:
    """op_sdk's source tree containing ``start`` (default: the current folder), or None."""
    here = os.path.abspath(start or os.getcwd())
    while True:
        if all(os.path.exists(os.path.join(here, p)) for p in
               ("pyproject.toml", os.path.join("op_sdk", "ops"), os.path.join("csrc", "npu"),
                os.path.join("tests", "ops"))):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def plan(name: str, schema: str, namespace: str, package: str = "op_sdk") -> dict:
    """The templates' context, from the schema; raises NewOpError naming the rule."""
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or keyword.iskeyword(name):
        raise NewOpError(f"new-op: NAME {name!r} must be a lower-case identifier "
                         f"(letters, digits, underscores)")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", namespace):
        raise NewOpError(f"new-op: --namespace {namespace!r} must be a lower-case identifier")
    if not re.fullmatch(r"[a-z][a-z0-9_]*", package) or keyword.iskeyword(package):
        raise NewOpError(f"new-op: --package {package!r} must be a lower-case identifier")
    try:
        s = torch._C.parse_schema(schema)
    except RuntimeError as e:
        raise NewOpError(f"new-op: --schema does not parse: {str(e).splitlines()[0]}") from None
    if s.name != name:
        raise NewOpError(f"new-op: the schema names the operator {s.name!r}, NAME is {name!r}")
    args = list(s.arguments)
    if not args or args[0].type.kind() != "TensorType":
        raise NewOpError("new-op: the schema's first argument must be a Tensor (the generated "
                         "kernels start as copies of it)")
    if not s.returns or not all(r.type.kind() == "TensorType" for r in s.returns):
        raise NewOpError("new-op: the schema must return one or more Tensors")
    for a in args[1:]:
        if a.alias_info is not None:
            raise NewOpError(f"new-op: --schema: only the first argument may be written in "
                             f"place, not '{a.name}'")
    for a in args:
        if _type(a) not in ("Tensor", "Tensor?", *_ATTRS) and a.alias_info is None:
            raise NewOpError(f"new-op: --schema: argument '{a.name}' has type {_type(a)}; the "
                             "templates write Tensor, Tensor?, float, int, bool, int[] and str "
                             "arguments (add others by hand)")
    inplace = any(a.alias_info is not None and a.alias_info.is_write for a in args)
    if inplace:
        if not name.endswith("_") or args[0].alias_info is None or len(s.returns) != 1:
            raise NewOpError("new-op: --schema: an in-place schema writes its first argument "
                             "(Tensor(a!)), returns it, and its name ends with '_'")
    functional = name[:-1] if inplace else name
    slice_ = functional[len("npu_"):] if functional.startswith("npu_") else functional
    out_names = ["y"] if len(s.returns) == 1 else [f"y{i}" for i in range(len(s.returns))]
    camel = _camel(slice_)

    def arg(a):
        t = _type(a) if a.alias_info is None else "Tensor"
        tensor = t.startswith("Tensor")
        default = repr(a.default_value) if a.has_default_value() else None
        ir_type, sample = _ATTRS.get(t, (None, None))
        return {"name": a.name, "type": t, "tensor": tensor, "optional": t == "Tensor?",
                "kwonly": bool(a.kwarg_only),
                "default": default, "ir_type": ir_type,
                "sample": None if tensor or default is not None else sample,
                "cpp_default": _cpp_default(a.default_value, ir_type) if default else None,
                "aclnn": (_lower_camel(a.name) + ("Optional" if t == "Tensor?" else ""))}

    argl = [arg(a) for a in args]
    # the Python parameter list of the slice's functions: the schema's, '*' included
    params, star = [], False
    for a in argl:
        if a["kwonly"] and not star:
            params.append("*")
            star = True
        params.append(a["name"] + (f"={a['default']}" if a["default"] is not None else ""))
    tensors = [a for a in argl if a["tensor"]]
    attrs = [a for a in argl if not a["tensor"]]
    aclnn = ([f"const aclTensor* {a['aclnn']}" for a in tensors]
             + [f"{_ACLNN_CTYPES[a['ir_type']]} {a['aclnn']}" for a in attrs]
             + [f"const aclTensor* {o}Out" for o in out_names])
    functional_schema = (re.sub(r"\(\w!?\)", "", schema.replace(f"{name}(", f"{functional}(", 1))
                         if inplace else schema)
    qual = name if namespace == "npu" else f"{namespace}::{name}"
    fqual = functional if namespace == "npu" else f"{namespace}::{functional}"
    return {"name": name, "namespace": namespace, "package": package, "schema": schema,
            "functional_schema": functional_schema, "inplace": inplace, "functional": functional,
            "slice": slice_, "camel": camel, "args": argl, "tensors": tensors, "attrs": attrs,
            "py_params": ", ".join(params),
            "positional": [a for a in argl[1:] if not a["kwonly"]],
            "kwonly": [a for a in argl if a["kwonly"]],
            # the keyword-only arguments a sample call passes (tensors, attributes without a default)
            "kw_samples": [a for a in argl if a["kwonly"] and (a["tensor"] or a["sample"] is not None)],
            "first": args[0].name, "outs": out_names, "n_out": len(out_names),
            "qual": qual, "fqual": fqual, "aclnn_api": f"aclnn{camel}",
            "aclnn_params": aclnn, "npu": namespace == "npu"}


def _cpp_default(value, ir_type) -> str:
    if ir_type == "Bool":
        return "true" if value else "false"
    if ir_type == "ListInt":
        return "{" + ", ".join(str(v) for v in value) + "}"
    if ir_type == "Float":
        return f"{float(value)!r}"
    if ir_type == "String":
        return '"' + _quoted(str(value)) + '"'
    return str(value)


def _quoted(text: str) -> str:
    """text inside a double-quoted Python or C++ string literal."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _env():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["camel"] = _camel
    env.filters["q"] = _quoted  # a schema inside "...": its str defaults are double-quoted
    return env


def _template_paths(in_tree: bool) -> list[str]:
    """The templates' paths relative to TEMPLATES; ``project/`` holds a user project's own
    files (its packages' ``__init__``, its test fixtures), which the tree already has."""
    out = []
    for folder, _, files in os.walk(TEMPLATES):
        for f in files:
            if f.endswith(".j2"):
                rel = os.path.relpath(os.path.join(folder, f), TEMPLATES)
                if in_tree and rel.startswith("project" + os.sep):
                    continue
                out.append(rel)
    return sorted(out)


WIDTH = 120  # the line length the tree's linter allows (pyproject.toml, [tool.ruff])


def _outside_strings(code: str, start: int = 0):
    """(index, character) of ``code`` from ``start`` that lie outside string literals (a quote
    opens or closes one; a backslash escapes the next character inside one)."""
    quote, i = None, start
    while i < len(code):
        c = code[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        else:
            yield i, c
        i += 1


def _split_args(code: str, start: int) -> list[str] | None:
    """The pieces of ``code`` from ``start`` (just after an opening bracket) split at its
    top-level commas, each with its comma; None when the bracket does not close on the line."""
    pieces, depth, last = [], 0, start
    for i, c in _outside_strings(code, start):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            if depth == 0:
                pieces.append(code[last:i].strip())
                return [q for q in pieces if q] + [code[i:]]
            depth -= 1
        elif c == "," and depth == 0:
            pieces.append(code[last:i + 1].strip())
            last = i + 1
    return None


def _first_bracket(line: str) -> int:
    """The index of the line's first "(" or "[" outside a string literal, or -1 (a schema
    string's brackets are not the code's)."""
    return next((i for i, c in _outside_strings(line) if c in "(["), -1)


def _fit_line(line: str, in_string: bool) -> list[str]:
    """One rendered Python line over WIDTH, folded: a comment or docstring line re-wrapped, a
    call or signature broken at its top-level commas (continuations under the bracket), else
    marked for the linter (a long literal, such as a schema string)."""
    indent = line[: len(line) - len(line.lstrip())]
    text = line.strip()
    if in_string or text.startswith(("#", '"""')):
        lead = indent + ("# " if text.startswith("#") else "")
        body = text[2:] if text.startswith("# ") else text
        return textwrap.wrap(body, WIDTH - len(lead), initial_indent=lead, subsequent_indent=lead,
                             break_long_words=False, break_on_hyphens=False) or [line]
    opening = _first_bracket(line)
    if opening >= 0:
        pieces = _split_args(line, opening + 1)
    else:  # a continuation line of arguments: split at its commas, under its indent
        pieces = _split_args(line + ")", len(indent))
        if pieces:
            pieces[-1] = pieces[-1][:-1]
        opening = len(indent) - 1
    if pieces and len(pieces) > 2:
        closing = pieces.pop()
        lines, current = [], line[: opening + 1] if opening >= len(indent) else indent
        for piece in pieces:
            fresh = current.endswith(("(", "[")) or not current.strip()
            candidate = current + ("" if fresh else " ") + piece
            if len(candidate) > WIDTH and not fresh:
                lines.append(current)
                current = " " * (opening + 1) + piece
            else:
                current = candidate
        lines.append(current + closing)
        if all(len(x) <= WIDTH for x in lines):
            return lines
    return [line + "  # noqa: E501"]


def _fit(text: str) -> str:
    """A rendered Python file with no line over WIDTH (the templates hold names of any length)."""
    out, in_string = [], False
    for line in text.split("\n"):
        if len(line) > WIDTH:
            out.extend(_fit_line(line, in_string))
        else:
            out.append(line)
        if line.count('"""') % 2 == 1:
            in_string = not in_string
    return "\n".join(out)


def render(p: dict, in_tree: bool) -> dict[str, str]:
    """{path relative to the root: text} of the slice (the binding source aside: it is
    generated from the declaration once the operator is defined)."""
    env = _env()
    ctx = {**p, "in_tree": in_tree}
    files = {}
    for rel in _template_paths(in_tree):
        target = rel[:-len(".j2")]
        if target.startswith("project" + os.sep):
            target = target[len("project" + os.sep):]
        target = (target.replace("__package__", p["package"]).replace("__slice__", p["slice"]))
        text = env.get_template(rel.replace(os.sep, "/")).render(ctx)
        files[target] = _fit(text) if target.endswith(".py") else text
    return files


def _run_child(root: str, argv: list[str], what: str) -> str:
    """Run ``python argv`` in ``root`` with ``root`` first on its path (an in-tree slice is
    read with that tree's op_sdk, a project's with its package), so that what it imports is
    not defined in this process; its stdout, or NewOpError naming ``what``."""
    import subprocess

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root] + [q for q in sys.path if q])}
    out = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env, cwd=root)
    if out.returncode != 0:
        raise NewOpError(f"new-op: {what} failed:\n{out.stderr[-3000:]}")
    return out.stdout


def _generate_binding(p: dict, root: str) -> tuple[str, str]:
    """(path, text) of csrc/npu/<operator>.cpp, generated by op_sdk.npu.binding from the
    operator's declaration (the slice's ops module, imported in a child process: writing a
    slice defines no operator in the caller's process)."""
    import json

    code = ("import importlib, json, sys\n"
            f"importlib.import_module({p['package'] + '.ops.' + p['slice']!r})\n"
            "from op_sdk import library\n"
            "from op_sdk.npu.binding import generate_source\n"
            f"print(json.dumps(generate_source(library.get_op({p['functional']!r}, "
            f"{p['namespace']!r}))))\n")
    stdout = _run_child(root, ["-c", code],
                        f"generating csrc/npu/{p['functional']}.cpp from the slice's declaration")
    return (os.path.join(root, "csrc", "npu", f"{p['functional']}.cpp"),
            json.loads(stdout.strip().splitlines()[-1]))


def regenerate_docs(tree: str) -> list[str]:
    """`op-sdk docs` in the tree, in a child process (which imports the new slice with the
    rest); the files it rewrote, relative to the tree."""
    stdout = _run_child(tree, ["-m", "op_sdk", "docs"], "op-sdk docs")
    return [line.removeprefix("rewrote: ") for line in stdout.splitlines()]


def target(name: str, out_dir: str = ".", namespace: str | None = None, in_tree: str | None = None,
           package: str | None = None) -> tuple[str, str, str]:
    """(root, namespace, package) of a slice: the source tree's root, namespace npu for an
    npu_* name else op_sdk, package op_sdk (``in_tree``); else the project folder
    ``out_dir/<package>``, namespace my_ops by default, package the namespace by default."""
    if in_tree is not None:
        return in_tree, namespace or ("npu" if name.startswith("npu_") else "op_sdk"), "op_sdk"
    namespace = namespace or "my_ops"
    package = package or namespace
    return os.path.join(out_dir, package), namespace, package


def write(name: str, schema: str, out_dir: str = ".", namespace: str | None = None,
          force: bool = False, in_tree: str | None = None, package: str | None = None) -> list[str]:
    """Write the slice; returns the paths written. ``in_tree``: the source tree's root."""
    root, namespace, package = target(name, out_dir, namespace, in_tree, package)
    p = plan(name, schema, namespace, package)
    if in_tree is None and package == "op_sdk":
        raise NewOpError("new-op: --package op_sdk is op_sdk's own: use --in-tree inside its "
                         "source tree")
    files = render(p, in_tree is not None)
    slice_files = [rel for rel in files if in_tree is not None or not _shared(rel)]
    existing = [rel for rel in slice_files if os.path.exists(os.path.join(root, rel))]
    binding = os.path.join(root, "csrc", "npu", f"{p['functional']}.cpp")
    if os.path.exists(binding):
        existing.append(os.path.relpath(binding, root))
    if existing and not force:
        raise NewOpError(f"new-op: the slice '{p['slice']}' exists in {root} "
                         f"({existing[0]}, ...) (use --force to overwrite)")
    if in_tree is not None:
        from op_sdk.library import registered_ops

        taken = {o.qualname for o in registered_ops()}
        for q in {f"{namespace}::{name}", f"{namespace}::{p['functional']}"} & taken:
            mod = next(o.module for o in registered_ops() if o.qualname == q)
            if mod != f"op_sdk.ops.{p['slice']}":
                raise NewOpError(f"new-op: {q} is already defined (by {mod})")
    written = []
    for rel, text in files.items():
        path = os.path.join(root, rel)
        if os.path.exists(path) and _shared(rel):
            continue  # a project's package / fixture file, written by the first slice
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        written.append(path)
    path, text = _generate_binding(p, root)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    written.append(path)
    return written


def _shared(rel: str) -> bool:
    """A project file that every slice of the project shares (written once)."""
    return os.path.basename(rel) in ("__init__.py", "conftest.py", "CMakeLists.txt",
                                     "pyproject.toml", "README.md")
