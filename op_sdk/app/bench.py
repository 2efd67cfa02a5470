"""``op-sdk bench``: the benchmark suite (kernels and end-to-end) in one run.

Results go to one JSON file with the machine, versions and the command; PNG plots are
drawn from that file (``plot_results``), so a plot can be redrawn without re-running.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os

import torch

from op_sdk.app.demo import compile_model, logits_of
from op_sdk.app.machine import machine_facts
from op_sdk.app.timing import Progress, time_interleaved
from op_sdk.app.models import DecoderConfig, DeepSeekW8A8

DECODE_TOKENS = (1, 4, 16)
PREFILL_TOKENS = (512,)


# compiled contenders of the end-to-end rows (see op_sdk.app.demo.compile_model)
CONTENDERS = ("inductor", "inductor_cpp", "op_sdk")


def run_e2e(cfg: DecoderConfig, tokens: tuple[int, ...], repeats: int = 10,
            progress: bool = True) -> list[dict]:
    """Time per forward of the model for each token count: eager, Inductor, op_sdk."""
    cfg.validate()
    model = DeepSeekW8A8(cfg).eval()
    bar = Progress(len(tokens) * (len(CONTENDERS) + 1), enabled=progress)
    rows = []
    with torch.no_grad():
        # first calls of a process pay one-off costs (oneDNN primitive creation, page
        # faults of fresh weights): keep them out of the first measured row
        for t in tokens:
            for _ in range(2):
                model(model.example_tokens(1, t))
        for t in tokens:
            ids = model.example_tokens(1, t)
            ref = logits_of(model(ids))
            row = {"tokens": t, "phase": "decode" if t <= 16 else "prefill",
                   "seconds": {}, "compile_seconds": {}, "max_abs_error": {}}
            torch._dynamo.reset()
            fns = {"eager": lambda: model(ids)}
            for name in CONTENDERS:
                run = compile_model(model, ids, name)
                row["compile_seconds"][name] = run.compile_seconds
                row["max_abs_error"][name] = float((run.output - ref).abs().max())
                fns[name] = run.call
                bar.step(f"{t} tokens: {name} compiled")
            row["seconds"] = time_interleaved(fns, repeats)
            bar.step(f"{t} tokens: timed")
            s = row["seconds"]
            row["speedup_vs_eager"] = s["eager"] / s["op_sdk"]
            row["speedup_vs_inductor"] = s["inductor"] / s["op_sdk"]
            row["speedup_vs_inductor_cpp"] = s["inductor_cpp"] / s["op_sdk"]
            rows.append(row)
    return rows


def run_bench(out_dir: str, cfg: DecoderConfig, tokens: tuple[int, ...], repeats: int,
              kernels: bool, quick: bool, command: str, progress: bool = True) -> str:
    """Run the suite, write ``results.json`` and the plots into out_dir; return the JSON path."""
    os.makedirs(out_dir, exist_ok=True)
    probe = os.path.join(out_dir, ".write-test")
    with open(probe, "w"):
        pass
    os.remove(probe)
    results = {
        "machine": machine_facts(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": command,
        "model": dataclasses.asdict(cfg),
        "e2e": run_e2e(cfg, tokens, repeats, progress),
    }
    if kernels:
        from op_sdk.app.kernel_bench import run_kernel_bench

        results["kernels"] = run_kernel_bench(quick=quick)
    path = os.path.join(out_dir, "results.json")
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    plot_results(path, out_dir)
    return path


def plot_results(json_path: str, out_dir: str) -> list[str]:
    """Draw PNG plots from a results file; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with open(json_path) as f:
        results = json.load(f)
    written = []
    e2e = results.get("e2e", [])
    if e2e:
        fig, ax = plt.subplots(figsize=(7, 4))
        labels = [f"{r['tokens']} tok" for r in e2e]
        x = range(len(e2e))
        names = [n for n in ("eager", *CONTENDERS) if n in e2e[0]["seconds"]]
        width = 0.8 / len(names)
        for k, name in enumerate(names):
            ax.bar([i + (k - (len(names) - 1) / 2) * width for i in x],
                   [r["seconds"][name] * 1e3 for r in e2e], width, label=name)
        ax.set_xticks(list(x), labels)
        ax.set_ylabel("ms per forward (median)")
        ax.set_yscale("log")
        m = results["model"]
        ax.set_title(f"DeepSeek-style W8A8, {m['layers']} layers, hidden {m['hidden']}, "
                     f"{results['machine']['threads']} threads")
        ax.legend()
        written.append(_save(fig, out_dir, "e2e.png"))
    kern = results.get("kernels", {}).get("results", [])
    if kern:
        big = [r for r in kern if r.get("T") == max(k.get("T", 0) for k in kern)]
        if big:
            fig, ax = plt.subplots(figsize=(9, 4.5))
            names = [f"{r['op'].replace('npu_', '')}\n{r['H']} {r['dtype']}" for r in big]
            x = range(len(big))
            ax.bar([i - 0.2 for i in x], [r.get("speedup_vs_compiled", 0) for r in big], 0.4,
                   label="vs torch.compile")
            ax.bar([i + 0.2 for i in x], [r.get("speedup_vs_eager", 0) for r in big], 0.4,
                   label="vs eager unfused")
            ax.axhline(1.0, color="#444", lw=0.8)
            ax.set_xticks(list(x), names, rotation=60, ha="right", fontsize=7)
            ax.set_ylabel("speedup of the fused kernel")
            ax.set_title(f"fused kernels at T = {big[0]['T']}")
            ax.legend()
            written.append(_save(fig, out_dir, "kernels.png"))
    return written


def _save(fig, out_dir: str, name: str) -> str:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def format_results(json_path: str) -> str:
    """A readable summary of a results file."""
    with open(json_path) as f:
        results = json.load(f)
    m, mach = results["model"], results["machine"]
    lines = [f"{mach['cpu']}, {mach['threads']} threads, torch {mach['torch']}",
             f"model: {m['layers']} layers, hidden {m['hidden']}, {m['dtype']}", "",
             f"{'tokens':>6} {'phase':>8} {'eager ms':>9} {'inductor ms':>12} "
             f"{'ind+cpp ms':>11} {'op_sdk ms':>10} {'vs eager':>9} {'vs inductor':>12} "
             f"{'vs ind+cpp':>11}", "(ind+cpp: Inductor with its C++ wrapper and freezing)"]
    for r in results.get("e2e", []):
        s = r["seconds"]
        cpp = s.get("inductor_cpp", float("nan"))
        lines.append(f"{r['tokens']:>6} {r['phase']:>8} {s['eager'] * 1e3:>9.3f} "
                     f"{s['inductor'] * 1e3:>12.3f} {cpp * 1e3:>11.3f} "
                     f"{s['op_sdk'] * 1e3:>10.3f} {r['speedup_vs_eager']:>8.2f}x "
                     f"{r['speedup_vs_inductor']:>11.2f}x "
                     f"{r.get('speedup_vs_inductor_cpp', float('nan')):>10.2f}x")
    kern = results.get("kernels", {}).get("results", [])
    if kern:
        lines += ["", f"{'kernel':<32} {'T':>5} {'H':>5} {'dtype':>9} {'us':>9} {'GB/s':>6} "
                  f"{'vs eager':>9} {'vs compile':>10}"]
        for r in kern:
            lines.append(f"{r['op']:<32} {r['T']:>5} {r['H']:>5} {r['dtype']:>9} "
                         f"{r['fused_us']:>9.1f} {r['fused_GBps']:>6.1f} "
                         f"{r['speedup_vs_eager']:>8.2f}x {r['speedup_vs_compiled']:>9.2f}x")
    return "\n".join(lines)
