"""``op-sdk bench --fusions``: the benefit model's prediction against the time a fusion
really saves, per default fusion and size.

For each default fusion (one variant: the plainest spelling) at decode sizes (1 and 16
rows) and a prefill size (4096 rows; hidden 4096 for the norm fusions, 16 heads of
128 x 128 for bmm+transpose, whose rows are heads x tokens, 32 heads of 128 per token for
rms_norm_rope, Qwen3's transposed q):

* predicted: the search function is traced (fake tensors, canonical spelling) and the
  fusion's own pattern pass runs on it with the benefit model on and no threshold, so
  the prediction comes from the same code a compile uses (op_sdk/patterns/benefit.py),
  priced on the device model asked for (default: this CPU, measured once);
* measured: the unfused code (the variant's ``search_fn``, eager) and the fused code
  (``replace_fn``, eager) timed as the kernel benchmark times them
  (op_sdk.app.timing.measure: round-robin samples of >= 2 ms, a round during which
  other processes took CPU time measured again); measured saving = unfused - fused, of
  the medians (the minima are in the file too).

With a user's model (``op-sdk bench --fusions FILE.py:FUNCTION``,
``run_model_fusion_bench``): the model compiled with the fusions as configured, with every
match, and with none, timed per forward, the predicted saving against the measured one.

The error is predicted benefit - measured saving (us). Eager timing includes the Python
dispatch of every operator (the views too), which the model counts as launches only for
kernels. Results: one JSON file with the machine, torch version, command, load average
(``uptime``; the machine may be shared) and the CPU model's measured numbers.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import subprocess

import torch

__all__ = ["fusion_cases", "predict_case", "run_fusion_bench", "format_fusion_results",
           "run_model_fusion_bench", "write_model_fusion_bench", "format_model_fusion_results"]

DECODE_ROWS = (1, 16)
PREFILL_ROWS = (4096,)
HIDDEN = 4096
HEADS, HEAD_DIM = 16, 128

# the variant timed per fusion (default: its first variant without an explicit epsilon)
VARIANTS = {"transpose_batchmatmul": "transpose(bmm)", "rms_norm_rope": "permute",
            # dst_type is a pattern scalar of every variant (the example inputs give it)
            "add_rms_norm_dynamic_mx_quant": "x_out", "rms_norm_dynamic_mx_quant": "composite"}


def _variant(fusion):
    name = VARIANTS.get(fusion.name)
    if name is not None:
        return fusion.variant(name)
    return next(v for v in fusion.variants() if not v.scalar_workaround)


def _sizes(fusion, rows: int) -> dict:
    if fusion.name == "transpose_batchmatmul":
        return {"batch": HEADS, "m": rows, "k": HEAD_DIM, "n": HEAD_DIM}
    if fusion.name == "rms_norm_rope":
        return {"tokens": rows, "heads": 2 * HEADS, "head_dim": HEAD_DIM, "batch": 1}
    return {"tokens": rows, "hidden": HIDDEN, "lead": (1,)}


def _dtype(fusion) -> torch.dtype:
    return torch.bfloat16 if torch.bfloat16 in fusion.dtypes else fusion.dtypes[0]


def fusion_cases(rows=DECODE_ROWS + PREFILL_ROWS) -> list[tuple]:
    """(fusion, variant, rows, sizes) for every default fusion and row count."""
    from op_sdk.patterns import DEFAULT_FUSIONS

    return [(f, _variant(f), r, _sizes(f, r)) for f in DEFAULT_FUSIONS for r in rows]


def predict_case(fusion, variant, inputs, device: str = "cpu") -> dict | None:
    """The benefit model's prediction for ``variant.search_fn`` on ``inputs``, from the
    fusion's pattern pass run on the traced function (None when it does not match)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from op_sdk.compiler.report import GraphReport
    from op_sdk.patterns.benefit import planning
    from op_sdk.patterns.canonical import canonicalize
    from op_sdk.patterns.diagnostics import recording
    from op_sdk.patterns.tracing import trace_canonical

    mode = FakeTensorMode()
    fake = [mode.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in inputs]
    with mode:
        gm = trace_canonical(variant.search_fn, fake)
    canonicalize(gm.graph)
    report = GraphReport(graph="bench", mode="eager", executor="eager")
    # no threshold: every match is priced and applied, so its prediction is recorded
    with recording(report), planning(-float("inf"), device):
        fusion.registry().apply(gm)
    found = report.predicted(fusion.name)
    return found[0] if found else None


def run_fusion_bench(rows=DECODE_ROWS + PREFILL_ROWS, repeats: int = 10,
                     device: str = "cpu", progress: bool = True,
                     quiet_timeout: float = 0.0) -> dict:
    """Predicted against measured, per default fusion and row count."""
    from op_sdk.app.timing import Progress, measure
    from op_sdk.benefit import device_model

    model = device_model(device)
    cases = fusion_cases(rows)
    bar = Progress(len(cases), enabled=progress)
    out = []
    for fusion, variant, r, sizes in cases:
        inputs = fusion.inputs(variant, _dtype(fusion), **sizes)
        prediction = predict_case(fusion, variant, inputs, device)
        with torch.no_grad():
            # both a few times first: one-off costs (first-call dispatch, allocator pages)
            # out of the calibration, which times one call
            for _ in range(3):
                variant.search_fn(*inputs)
                variant.replace_fn(*inputs)
            m = measure({"unfused": lambda: variant.search_fn(*inputs),
                         "fused": lambda: variant.replace_fn(*inputs)}, repeats, quiet_timeout)
        t, low = m["median_s"], m["min_s"]
        row = {"fusion": fusion.name, "variant": variant.name, "tokens": r,
               "sizes": {k: list(v) if isinstance(v, tuple) else v for k, v in sizes.items()},
               "dtype": str(_dtype(fusion)).replace("torch.", ""),
               "measured_unfused_us": t["unfused"] * 1e6, "measured_fused_us": t["fused"] * 1e6,
               "measured_saved_us": (t["unfused"] - t["fused"]) * 1e6,
               "min_unfused_us": low["unfused"] * 1e6, "min_fused_us": low["fused"] * 1e6,
               "min_saved_us": (low["unfused"] - low["fused"]) * 1e6,
               "contended_rounds": m["contended_rounds"], "rounds": repeats}
        if prediction is not None:
            row.update({
                "predicted_unfused_us": prediction["seconds_before"] * 1e6,
                "predicted_fused_us": (prediction["seconds_after"]
                                       + prediction["tiling_loss"]) * 1e6,
                "predicted_benefit_us": prediction["benefit"] * 1e6,
                "bytes_before": prediction["bytes_before"],
                "bytes_after": prediction["bytes_after"],
                "launches_before": prediction["launches_before"],
                "launches_after": prediction["launches_after"],
                "error_us": (prediction["benefit"] - (t["unfused"] - t["fused"])) * 1e6,
                # the decision: would the default threshold (0 us) apply it, and does it pay
                "predicted_pays": prediction["benefit"] > 0,
                "measured_pays": t["unfused"] > t["fused"],
            })
        out.append(row)
        bar.step(f"{fusion.name} {r} rows")
    return {"device_model": dataclasses.asdict(model), "results": out}


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        with open("/proc/loadavg") as f:
            return "load average: " + ", ".join(f.read().split()[:3])


def write_fusion_bench(path: str, command: str, rows=DECODE_ROWS + PREFILL_ROWS,
                       repeats: int = 10, device: str = "cpu", progress: bool = True,
                       quiet_timeout: float = 0.0) -> str:
    """Run the fusion benchmark, write the results JSON to ``path``; return the path."""
    return _write(path, command,
                  lambda: run_fusion_bench(rows, repeats, device, progress, quiet_timeout))


def _write(path: str, command: str, run) -> str:
    """``run()``'s results as JSON at ``path``, with the machine, the date, the command and
    the load before and after (the machine may be shared); returns the path."""
    from op_sdk.app.machine import machine_facts

    folder = os.path.dirname(path)
    if folder:
        os.makedirs(folder, exist_ok=True)
    results = {"machine": machine_facts(),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "command": command, "uptime_before": _uptime(), **run()}
    results["uptime_after"] = _uptime()
    with open(path, "w") as f:
        json.dump(results, f, indent=2)
    return path


def format_fusion_results(path: str) -> str:
    with open(path) as f:
        results = json.load(f)
    mach, dm = results["machine"], results["device_model"]
    lines = [f"{mach['cpu']}, {mach['threads']} threads, torch {mach['torch']}; "
             f"{results['uptime_before']}", f"medians of {results['results'][0]['rounds']} "
             "rounds (samples >= 2 ms); min saved: of the minima" if results["results"] else "",
             f"device model {dm['name']}: {dm['bandwidth'] / 1e9:.1f} GB/s, "
             f"{dm['launch_seconds'] * 1e6:.2f} us per launch, {dm['cores']} cores", "",
             f"{'fusion':<36} {'tok':>5} {'B before':>10} {'B after':>10} {'L':>5} "
             f"{'unfused us':>11} {'fused us':>10} {'saved us':>10} {'pred us':>9} "
             f"{'error us':>9} {'pays? pred/meas':>16} {'min saved':>10}"]
    for r in results["results"]:
        if "predicted_benefit_us" not in r:
            lines.append(f"{r['fusion']:<36} {r['tokens']:>5}  (the pattern did not match)")
            continue
        lines.append(
            f"{r['fusion']:<36} {r['tokens']:>5} {r['bytes_before']:>10,} "
            f"{r['bytes_after']:>10,} {r['launches_before']:>2}>{r['launches_after']:<2} "
            f"{r['measured_unfused_us']:>11.1f} {r['measured_fused_us']:>10.1f} "
            f"{r['measured_saved_us']:>10.1f} {r['predicted_benefit_us']:>9.1f} "
            f"{r['error_us']:>9.1f} "
            f"{('yes' if r['predicted_pays'] else 'no'):>8}/"
            f"{('yes' if r['measured_pays'] else 'no'):<7} {r['min_saved_us']:>10.1f}")
    return "\n".join(lines)


def run_model_fusion_bench(user_model, repeats: int = 10, device: str = "cpu") -> dict:
    """A user's model (``op_sdk.app.report.load_model``'s (model, inputs, description))
    compiled with op_sdk's backend three ways, in max-autotune: as configured by default,
    with every match applied (the benefit model off), and with no fusion (native_ops and
    pattern_fusion_pass off); each timed per forward (``time_interleaved_stats``, the
    contenders interleaved). Per contender: what fused (explain's table) and each graph's
    outcome line; the benefit model's predicted saving of the matches it decided and
    applied (the native_ops rewrites by default; planned on ``device``) against the
    measured one (no fusion - that contender)."""
    import op_sdk
    from op_sdk.app.timing import time_interleaved_stats

    model, inputs, described = user_model
    contenders = {
        "op_sdk": {},
        "every match": {"experimental_config.fusion_benefit_threshold_us": None},
        "no fusion": {"experimental_config.native_ops": False,
                      "experimental_config.pattern_fusion_pass": False},
    }
    calls, info = {}, {}
    import torch._inductor.config as inductor_config

    for name, options in contenders.items():
        cfg = op_sdk.CompilerConfig()
        cfg.mode = "max-autotune"
        cfg.experimental_config.fusion_benefit_device = device
        for path, value in options.items():
            group, leaf = path.split(".")
            setattr(getattr(cfg, group), leaf, value)
        backend = op_sdk.get_npu_backend(compiler_config=cfg)
        torch._dynamo.reset()
        with torch.no_grad(), inductor_config.patch(fx_graph_cache=False):
            compiled = torch.compile(model, backend=backend, dynamic=False)
            compiled(*inputs)
        exp = op_sdk.explain(backend)
        info[name] = {"fusions": exp.table(),
                      "outcome": [g.outcome() for r in exp.reports for g in r.graphs],
                      "predicted_saved_us": sum(r["benefit_us"] for r in exp.table())}
        calls[name] = (lambda c=compiled: c(*inputs))
    with torch.no_grad():
        stats = time_interleaved_stats(calls, repeats)
    base = stats["no fusion"]["median"]
    rows = []
    for name in contenders:
        st = stats[name]
        rows.append({"contender": name, "ms_per_forward": st["median"] * 1e3,
                     "iqr_ms": [st["q1"] * 1e3, st["q3"] * 1e3], "n": st["n"],
                     "measured_saved_us": (base - st["median"]) * 1e6, **info[name]})
    return {"model": described, "benefit_device": device, "repeats": repeats, "results": rows}


def write_model_fusion_bench(path: str, command: str, user_model, repeats: int = 10,
                             device: str = "cpu") -> str:
    """``run_model_fusion_bench`` as a results JSON (machine, date, command, load)."""
    return _write(path, command, lambda: run_model_fusion_bench(user_model, repeats, device))


def format_model_fusion_results(path: str) -> str:
    with open(path) as f:
        results = json.load(f)
    mach = results["machine"]
    lines = [f"{results['model']}: {mach['cpu']}, {mach['threads']} threads, torch "
             f"{mach['torch']}; {results['uptime_before']}",
             f"max-autotune; ms per forward (median, IQR); benefit model planned on "
             f"{results['benefit_device']}", "",
             f"{'contender':<12} {'ms':>8} {'IQR':>17} {'pred saved us':>14} "
             f"{'meas saved us':>14}  fused"]
    for r in results["results"]:
        fused = ", ".join(f"{f['pattern']} x{f['matches']}" for f in r["fusions"] if f["matches"])
        lines.append(f"{r['contender']:<12} {r['ms_per_forward']:>8.3f} "
                     f"{r['iqr_ms'][0]:>8.3f}-{r['iqr_ms'][1]:<8.3f} "
                     f"{r['predicted_saved_us']:>14.1f} {r['measured_saved_us']:>14.1f}  "
                     f"{fused or '-'}")
    for r in results["results"]:
        for line in r["outcome"]:
            lines.append(f"  {r['contender']}: {line}")
    return "\n".join(lines)
