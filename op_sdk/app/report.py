"""``op-sdk report [FILE.py:FUNCTION]``: compile the embedded model, or a user's (the
function returns the model and its example inputs), and write what the fusions did as a
self-contained HTML page and as Markdown with Mermaid diagrams, plus the graph dumps."""

from __future__ import annotations

import dataclasses
import glob
import os
import sys

import torch

from op_sdk.app.demo import logits_of
from op_sdk.app.models import DecoderConfig, DeepSeekW8A8
from op_sdk.app.report_page import render_html, render_markdown


def compiler_config(mode: str = "max-autotune", fusions: str = "all"):
    """The report's CompilerConfig; a bad mode or fusion policy raises ValueError here."""
    import op_sdk

    config = op_sdk.CompilerConfig()
    config.mode = mode
    config.experimental_config.max_autotune_fusions = fusions
    return config


def stream_data(explanation) -> list[dict]:
    """The report's "streams" entries: one per graph with air stream scopes."""
    out = []
    for r in explanation.reports:
        for g in r.graphs:
            if g.streams:
                out.append({"graph": f"compile #{r.index} {g.graph} graph",
                            "execution": g.stream_execution, "nodes": dict(g.streams),
                            "lanes": g.nodes_by_stream()})
    return out


def scope_data(explanation) -> list[dict]:
    """The report's "scopes" entries: one per graph with TorchAir scope regions
    (super_kernel, limit_core_num, op_never_timeout, data_dump), each region's operators."""
    return [{"graph": f"compile #{r.index} {g.graph} graph", "regions": dict(g.scopes)}
            for r in explanation.reports for g in r.graphs if g.scopes]


def trace_data(fn, out_dir: str) -> dict:
    """Profile one call of ``fn`` into ``out_dir``/trace.json; the report's "trace" entry."""
    from op_sdk.app.trace import thread_summary, write_trace

    path = os.path.join(out_dir, "trace.json")
    write_trace(fn, path)
    return {"path": path, **thread_summary(path)}


def load_model(spec: str, command: str = "report"):
    """A user's model for the report: ``spec`` is ``path/to/file.py:function``, the
    function taking no arguments and returning ``(model, example_inputs)`` (a module or
    any callable, and a tuple / list of its positional inputs or one tensor). Returns
    (model, inputs tuple, a description); a ValueError names what is wrong."""
    import importlib.util

    path, sep, name = spec.rpartition(":")
    if not sep or not path.endswith(".py") or not name.isidentifier():
        raise ValueError(f"{command}: MODEL must be FILE.py:FUNCTION, got {spec!r}")
    if not os.path.isfile(path):
        raise ValueError(f"{command}: MODEL: no file {path!r}")
    # its folder first on sys.path, as `python FILE.py` has it (for its own imports)
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_name = "op_sdk_user_model_" + os.path.splitext(os.path.basename(path))[0]
    loader = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{command}: MODEL: {path} has no function {name!r}")
    made = fn()
    if not (isinstance(made, (tuple, list)) and len(made) == 2 and callable(made[0])):
        raise ValueError(f"{command}: MODEL: {name}() must return (model, example_inputs), "
                         f"got {type(made).__name__}")
    model, inputs = made
    inputs = (inputs,) if isinstance(inputs, torch.Tensor) else tuple(inputs)
    return model, inputs, f"{type(model).__name__} from {spec}"


def _max_abs_difference(out, ref) -> float:
    """The largest |compiled - eager| over the floating-point tensors of two outputs."""
    from torch.utils._pytree import tree_leaves

    pairs = [(o, r) for o, r in zip(tree_leaves(out), tree_leaves(ref))
             if isinstance(o, torch.Tensor) and o.is_floating_point() and o.numel()]
    return max((float((o.float() - r.float()).abs().max()) for o, r in pairs), default=0.0)


def run_report(cfg: DecoderConfig, out_dir: str, batch: int = 1, tokens: int = 8,
               mode: str = "max-autotune", fusions: str = "all",
               trace: bool = False, user_model=None) -> dict[str, str]:
    """Compile once with graph dumps on; returns {"html", "markdown", "dumps"} paths (and
    "trace", the Chrome trace of one compiled call, with ``trace``). The model is the
    embedded one (``cfg``, ``batch`` x ``tokens``), or ``user_model``: ``load_model``'s
    (model, inputs, description)."""
    import op_sdk

    cfg.validate()
    config = compiler_config(mode, fusions)
    dump_dir = os.path.join(out_dir, "dumps")
    os.makedirs(dump_dir, exist_ok=True)
    config.debug.graph_dump.type = "txt"
    config.debug.graph_dump.path = dump_dir
    backend = op_sdk.get_npu_backend(compiler_config=config)
    if user_model is None:
        model = DeepSeekW8A8(cfg).eval()
        inputs = (model.example_tokens(batch, tokens),)
        described = (f"DeepSeek-style W8A8, {cfg.layers} layers, hidden {cfg.hidden}, "
                     f"{cfg.dtype}, MLP quant {cfg.mlp_quant}")
        shown = f"batch {batch} x {tokens} tokens"
        output = logits_of
    else:
        model, inputs, described = user_model
        shown = ", ".join(f"{list(x.shape)} {str(x.dtype).replace('torch.', '')}"
                          if isinstance(x, torch.Tensor) else type(x).__name__ for x in inputs)
        output = lambda o: o  # noqa: E731
    torch._dynamo.reset()
    import torch._inductor.config as inductor_config

    with torch.no_grad(), inductor_config.patch(fx_graph_cache=False):
        ref = output(model(*inputs))
        compiled = torch.compile(model, backend=backend, dynamic=False)
        out = output(compiled(*inputs))
        traced = trace_data(lambda: compiled(*inputs), out_dir) if trace else None
    explanation = op_sdk.explain(backend)
    # in the order the passes wrote them (each stage's "before", then its "after")
    dumps = list(explanation.dumps) or sorted(glob.glob(os.path.join(dump_dir, "*")))
    data = {
        "title": "op_sdk fusion report",
        "facts": {
            "model": described,
            "input": shown,
            "mode": f"{mode} (fusions: {fusions})",
            "outcome": " | ".join(g.outcome() for r in explanation.reports for g in r.graphs),
            "max |compiled - eager|": f"{_max_abs_difference(out, ref):.4g}",
            "torch": torch.__version__,
        },
        "fusions": explanation.table(),
        "regions": explanation.regions,
        "near_misses": [dataclasses.asdict(m) for m in explanation.near_misses],
        "skipped": {k: v for r in explanation.reports for g in r.graphs
                    for k, v in g.fusions_skipped.items()},
        "dumps": [{"name": os.path.relpath(p, out_dir), "text": _read(p)} for p in dumps[:8]],
        "streams": stream_data(explanation),
        "scopes": scope_data(explanation),
        "trace": traced,
    }
    html_path = os.path.join(out_dir, "report.html")
    md_path = os.path.join(out_dir, "report.md")
    with open(html_path, "w") as f:
        f.write(render_html(data))
    with open(md_path, "w") as f:
        f.write(render_markdown(data))
    paths = {"html": html_path, "markdown": md_path, "dumps": dump_dir,
             "explanation": explanation}
    if traced:
        paths["trace"] = traced["path"]
    return paths


def _read(path: str, limit: int = 60_000) -> str:
    with open(path, errors="replace") as f:
        text = f.read(limit + 1)
    return text if len(text) <= limit else text[:limit] + "\n… (truncated)"
