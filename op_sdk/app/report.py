"""``op-sdk report``: compile the embedded model and write what the fusions did as a
self-contained HTML page and as Markdown with Mermaid diagrams, plus the graph dumps."""

from __future__ import annotations

import dataclasses
import glob
import os

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


def trace_data(fn, out_dir: str) -> dict:
    """Profile one call of ``fn`` into ``out_dir``/trace.json; the report's "trace" entry."""
    from op_sdk.app.trace import thread_summary, write_trace

    path = os.path.join(out_dir, "trace.json")
    write_trace(fn, path)
    return {"path": path, **thread_summary(path)}


def run_report(cfg: DecoderConfig, out_dir: str, batch: int = 1, tokens: int = 8,
               mode: str = "max-autotune", fusions: str = "all",
               trace: bool = False) -> dict[str, str]:
    """Compile once with graph dumps on; returns {"html", "markdown", "dumps"} paths (and
    "trace", the Chrome trace of one compiled call, with ``trace``)."""
    import op_sdk

    cfg.validate()
    config = compiler_config(mode, fusions)
    dump_dir = os.path.join(out_dir, "dumps")
    os.makedirs(dump_dir, exist_ok=True)
    config.debug.graph_dump.type = "txt"
    config.debug.graph_dump.path = dump_dir
    backend = op_sdk.get_npu_backend(compiler_config=config)
    model = DeepSeekW8A8(cfg).eval()
    ids = model.example_tokens(batch, tokens)
    torch._dynamo.reset()
    import torch._inductor.config as inductor_config

    with torch.no_grad(), inductor_config.patch(fx_graph_cache=False):
        ref = logits_of(model(ids))
        compiled = torch.compile(model, backend=backend, dynamic=False)
        out = logits_of(compiled(ids))
        traced = trace_data(lambda: compiled(ids), out_dir) if trace else None
    explanation = op_sdk.explain(backend)
    dumps = sorted(explanation.dumps) or sorted(glob.glob(os.path.join(dump_dir, "*")))
    data = {
        "title": "op_sdk fusion report",
        "facts": {
            "model": f"DeepSeek-style W8A8, {cfg.layers} layers, hidden {cfg.hidden}, "
                     f"{cfg.dtype}, MLP quant {cfg.mlp_quant}",
            "input": f"batch {batch} x {tokens} tokens",
            "mode": f"{mode} (fusions: {fusions})",
            "max |compiled - eager|": f"{float((out - ref).abs().max()):.4g}",
            "torch": torch.__version__,
        },
        "fusions": explanation.table(),
        "regions": explanation.regions,
        "near_misses": [dataclasses.asdict(m) for m in explanation.near_misses],
        "skipped": {k: v for r in explanation.reports for g in r.graphs
                    for k, v in g.fusions_skipped.items()},
        "dumps": [{"name": os.path.relpath(p, out_dir), "text": _read(p)} for p in dumps[:8]],
        "streams": stream_data(explanation),
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
