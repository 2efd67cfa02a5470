"""The generated parts of the documentation: ``op-sdk docs`` rewrites them, ``op-sdk docs
--check`` (run by the tests) fails when one is out of date.

* docs/options.md: every CompilerConfig option (path, default, choices, what it does).
* docs/operators.md, between its ``generated:operators`` markers: the operator table from
  the registry (each operator's declaration: schema, kernels per device, the fusions that
  produce it).
* benchmarks/results/README.md: the index of the results files, each with the command,
  CPU and date it records.
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
             "when set to a non-default value. Those are validated by TorchAir's rules with "
             "its error types and words (integer ranges, `dump_path` an existing folder: "
             "`FileNotFoundError`, `dump_step` / `dump_layer` its regular expressions, "
             "`dump_config_path` an existing .json file) and read back as TorchAir stores "
             "them: a str unless a bool or None (`static_model_ops_lower_limit` 5 reads "
             "\"5\"). `debug.graph_dump.path` and `debug.data_dump.path` read back as the "
             "real path, a str, as TorchAir's properties do.", "",
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
        produced.setdefault(fusion.fused_qualname, []).append(f"`{fusion.name}`")
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
                    f"{', '.join(produced.get(d.qualname, []))} | {ascendc_kernel(d)} |")
    return ("Generated from the operator declarations by `op-sdk docs` (schemas: `op-sdk ops "
            "--schemas`). \"reference\": the plain-PyTorch reference is the kernel. The "
            "`op_sdk::` operators are op_sdk's own (prepacked int8 weights, a norm + RoPE); the "
            "`air::` ones TorchAir's forms (torchair.ops). Ascend C kernel: "
            "its verification level (docs/ascendc.md; `op-sdk ops --npu` lists every NPU "
            "deliverable); hardware: not verified for any.\n\n"
            + "\n".join(rows) + "\n")


def render_npu_table() -> str:
    """README's table of the NPU deliverables of op_sdk's npu operators (and of its own
    operators that have them) and the level each reached (short forms of
    op_sdk.app.deliverables, the same in every process)."""
    import op_sdk
    from op_sdk.app.deliverables import ascendc_kernel, torchair_converts
    from op_sdk.converters import converter_for

    torchair_own = torchair_converts()
    rows = ["| operator | Ascend C kernel | OpPlugin binding | GE converter |",
            "| --- | --- | --- | --- |"]
    # the npu operators, and op_sdk's own that have NPU deliverables (op_sdk::rms_norm_rope)
    sdk = [d for d in op_sdk.registered_ops()
           if d.module.startswith("op_sdk.ops.") and (d.namespace == "npu" or d.aclnn is not None)]
    for d in sorted(sdk, key=lambda d: (d.namespace != "npu", d.name.lstrip("_"))):
        kernel = ascendc_kernel(d)
        kernel = "CPU-model tested" if kernel.startswith("source + CPU-model") else \
            "CANN's own (none of op_sdk's)" if kernel.startswith("CANN's own") else kernel
        binding = (" / ".join(f"`{api}`" for api in d.aclnn.apis)
                   + ": compiles, registration-checked" if d.aclnn is not None
                   else "torch_npu's own")
        if converter_for(d.op) is None:
            conv = "none"
        elif d.qualname in torchair_own:
            conv = "graph-checked, matches TorchAir's"
        else:
            conv = "graph-checked (registered with TorchAir)"
        name = d.name if d.namespace == "npu" else d.qualname
        rows.append(f"| `{name}` | {kernel} | {binding} | {conv} |")
    return ("Generated by `op-sdk docs` from the declarations. Levels, never more than a test "
            "here checks: source, compiles, CPU-model tested, registration-checked, "
            "graph-checked; CANN build and Ascend hardware: not verified for any.\n\n"
            + "\n".join(rows) + "\n")


def _result_facts(path: str) -> tuple[str, str, str]:
    """(command, machine, date) that a results file records ("" where it records none):
    the machine is the CPU, or for a CUDA run the GPU."""
    import json

    if not path.endswith(".json"):
        return "", "", ""
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if not isinstance(data, dict):
        return "", "", ""
    machine = data.get("machine") if isinstance(data.get("machine"), dict) else {}
    cpu = machine.get("cpu", "")
    family = machine.get("cpu_family_model", "")
    isa = (data.get("env") or {}).get("OP_SDK_CPU_ISA", "") if isinstance(data.get("env"), dict) else ""
    cpu = " ".join(x for x in (cpu, f"({family})" if family else "", f"ISA {isa}" if isa else "") if x)
    gpu = data.get("gpu")  # the CUDA benchmarks record the GPU (its name, or a dict with it)
    if not cpu and gpu:
        cpu = gpu.get("name", "") if isinstance(gpu, dict) else str(gpu)
    date = str(data.get("date") or data.get("started") or "")[:10]
    command = data.get("command", "")
    command = " ".join(command) if isinstance(command, list) else str(command)
    return command, cpu, date


def render_results_index(root: str) -> str:
    """benchmarks/results/README.md: every results file with what it records."""
    base = os.path.join(root, "benchmarks", "results")
    rows = []
    for folder, dirs, files in os.walk(base):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, base).replace(os.sep, "/")
            if rel == "README.md":
                continue
            if not name.endswith(".json"):  # a .csv / .png beside the run's .json
                source = next((p for p in (os.path.splitext(path)[0] + ".json",
                                           os.path.join(folder, "results.json"))
                               if os.path.isfile(p)), None)
                if source is not None:
                    rel_source = os.path.relpath(source, base).replace(os.sep, "/")
                    rows.append(f"| [`{rel}`]({rel}) | the same run as `{rel_source}` | | |")
                    continue
            command, cpu, date = _result_facts(path)
            command = command.replace("|", "\\|")
            rows.append(f"| [`{rel}`]({rel}) | `{command}` | {cpu} | {date} |" if command
                        else f"| [`{rel}`]({rel}) | | {cpu} | {date} |")
    return ("# Benchmark results\n\n"
            "Generated by `op-sdk docs` from the files of this folder: each results file, the "
            "command that wrote it, the CPU it ran on and the date it records (the files hold "
            "the full machine description, versions and settings). docs/results.md reads "
            "them; the README quotes it.\n\n"
            "| file | command | CPU | date |\n| --- | --- | --- | --- |\n"
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
    out = {os.path.join(root, "docs", "options.md"): render_options(),
           ops_path: _replace_between(ops, "operators", render_operator_table())}
    if os.path.isdir(os.path.join(root, "benchmarks", "results")):
        out[os.path.join(root, "benchmarks", "results", "README.md")] = render_results_index(root)
    readme_path = os.path.join(root, "README.md")
    if os.path.isfile(readme_path):
        with open(readme_path, encoding="utf-8") as f:
            readme = f.read()
        if "<!-- generated:npu -->" in readme:
            out[readme_path] = _replace_between(readme, "npu", render_npu_table())
    return out


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
