"""The generated parts of the documentation: ``op-sdk docs`` rewrites them, ``op-sdk docs
--check`` (run by the tests) fails when one is out of date.

* docs/options.md: every CompilerConfig option (path, default, choices, what it does).
* docs/operators.md, between its ``generated:operators`` markers: the operator table from
  the registry (each operator's declaration: schema, kernels per device, the fusions that
  produce it).
"""

from __future__ import annotations

import os

ROOT_MARKERS = ("pyproject.toml", "docs")


def _fmt(value) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def render_options() -> str:
    from op_sdk.compiler.config import _ANY, CompilerConfig

    lines = ["# CompilerConfig options", "",
             "Generated from `op_sdk.CompilerConfig` by `op-sdk docs`. TorchAir's names and "
             "defaults; setting an unknown name or a value outside the choices raises "
             "`ValueError`. \"no effect here\" marks TorchAir's graph-engine (GE), ACL-graph "
             "and NPU-dump options: accepted, validated, and reported by `get_npu_backend` "
             "when set to a non-default value.", "",
             "| option | default | choices | what it does |", "| --- | --- | --- | --- |"]
    for o in CompilerConfig().options():
        choices = "" if o.choices is _ANY else ", ".join(_fmt(c) for c in o.choices)
        doc = "no effect here (GE / ACL graph / NPU dump option)" if o.ge_only else o.doc
        doc = " ".join(doc.split()).replace("|", "\\|")
        lines.append(f"| `{o.path}` | `{_fmt(o.default)}` | {choices} | {doc} |")
    return "\n".join(lines) + "\n"


def render_operator_table() -> str:
    import op_sdk
    from op_sdk.patterns import DEFAULT_FUSIONS

    produced: dict[str, list[str]] = {}
    for fusion in DEFAULT_FUSIONS:
        produced.setdefault(fusion.fused_op, []).append(f"`{fusion.name}`")
    from op_sdk.app.deliverables import ascendc_kernel

    rows = ["| operator | CPU kernel | CUDA kernel | in-place pair | produced by the fusion | "
            "Ascend C kernel |",
            "| --- | --- | --- | --- | --- | --- |"]
    # the SDK's own operators only: a plugin imported into this process is not op_sdk's
    sdk = [d for d in op_sdk.registered_ops() if d.module.startswith("op_sdk.ops.")]
    for d in sorted(sdk, key=lambda d: (d.namespace != "npu", d.name.lstrip("_"))):
        declared = {dev: ("native C++" if dev in d.native else
                          "Triton" if dev == "cuda" and dev in d.kernels else
                          "Python" if dev in d.kernels else "reference")
                    for dev in ("cpu", "cuda")}
        pair = f"`{d.functional}`" if d.functional else ""
        name = d.name if d.namespace == "npu" else d.qualname
        rows.append(f"| `{name}` | {declared['cpu']} | {declared['cuda']} | {pair} | "
                    f"{', '.join(produced.get(d.name, []))} | {ascendc_kernel(d)} |")
    return ("Generated from the operator declarations by `op-sdk docs` (schemas: `op-sdk ops "
            "--schemas`). \"reference\": the plain-PyTorch reference is the kernel. The "
            "`op_sdk::` operators are op_sdk's own (prepacked int8 weights). Ascend C kernel: "
            "its verification level (docs/ascendc.md; `op-sdk ops --npu` lists every NPU "
            "deliverable); hardware: not verified for any.\n\n"
            + "\n".join(rows) + "\n")


def _replace_between(text: str, name: str, body: str) -> str:
    start, end = f"<!-- generated:{name} -->", f"<!-- end:{name} -->"
    i, j = text.index(start) + len(start), text.index(end)
    return text[:i] + "\n" + body + text[j:]


def generated(root: str) -> dict[str, str]:
    """{path: the content it must have}."""
    ops_path = os.path.join(root, "docs", "operators.md")
    with open(ops_path, encoding="utf-8") as f:
        ops = f.read()
    return {os.path.join(root, "docs", "options.md"): render_options(),
            ops_path: _replace_between(ops, "operators", render_operator_table())}


def find_root() -> str:
    here = os.path.abspath(os.getcwd())
    while True:
        if all(os.path.exists(os.path.join(here, m)) for m in ROOT_MARKERS):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            raise FileNotFoundError("op-sdk docs: run it inside the op_sdk source tree "
                                    "(no pyproject.toml + docs/ found above the current folder)")
        here = parent


def update(root: str, check: bool) -> list[str]:
    """Write (or, with check, only compare) the generated files; the stale ones' paths."""
    stale = []
    for path, content in generated(root).items():
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != content:
            stale.append(path)
            if not check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(content)
    return stale
