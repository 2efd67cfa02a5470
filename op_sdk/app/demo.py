"""``op-sdk demo``: what the SDK does to the embedded model, measured in one run.

Builds the DeepSeek-style W8A8 model, runs it in eager, under torch.compile's default
backend (Inductor) and under op_sdk's backend, and reports the fusions that fired, the
numerical agreement with eager, and the time per forward of each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
from collections.abc import Callable

import torch

from op_sdk.app.machine import machine_facts
from op_sdk.app.models import DecoderConfig, DeepSeekW8A8
from op_sdk.app.timing import Progress, time_interleaved_stats


# the agreement the demo and its test hold the compiled model to: max |logits - eager
# logits| within 5% of the largest |logit| (docs/usage.md, "The demo's verdicts")
TOLERANCE = 0.05


def logits_of(out):
    """The logits of a model output ((logits, aux) when the model taps a layer)."""
    return out[0] if isinstance(out, tuple) else out


@dataclasses.dataclass
class DemoResult:
    config: dict
    batch: int
    tokens: int
    patterns: dict
    fusion_rows: list
    near_misses: list
    max_abs_error: float
    max_abs_error_inductor: float
    ref_max_abs: float
    seconds: dict
    compile_seconds: dict
    machine: dict
    command: str
    spread: dict = dataclasses.field(default_factory=dict)

    def agreement(self) -> dict:
        """Each compiled contender's max |logits - eager logits|, relative to the largest
        |logit|, against TOLERANCE: {"op_sdk": (error, relative, within)}."""
        out = {}
        for name, err in (("inductor", self.max_abs_error_inductor), ("op_sdk", self.max_abs_error)):
            if err == err:  # compiled in this run
                rel = err / self.ref_max_abs if self.ref_max_abs else float("inf")
                out[name] = (err, rel, rel <= TOLERANCE)
        return out

    def to_json(self) -> dict:
        s = self.seconds
        return {
            "patterns": self.patterns,
            "max_abs_error": self.max_abs_error,
            "max_abs_error_inductor": self.max_abs_error_inductor,
            "reference_max_abs": self.ref_max_abs,
            "speedup_vs_eager": s["eager"] / s["op_sdk"],
            "speedup_vs_inductor": s["inductor"] / s["op_sdk"],
            "seconds_per_forward": s,
            "seconds_spread": self.spread,
            "tolerance_relative_to_max_logit": TOLERANCE,
            "within_tolerance": {k: v[2] for k, v in self.agreement().items()},
            "compile_seconds": self.compile_seconds,
            "fusions": self.fusion_rows,
            "near_misses": self.near_misses,
            "model": self.config,
            "batch": self.batch,
            "tokens": self.tokens,
            "machine": self.machine,
            "command": self.command,
        }


def run_demo(cfg: DecoderConfig, batch: int = 1, tokens: int = 8, repeats: int = 10,
             progress: bool = True, backends: tuple[str, ...] = ("inductor", "op_sdk"),
             command: str = "") -> DemoResult:
    import op_sdk

    cfg.validate()
    if batch < 1 or tokens < 1:
        raise ValueError(f"batch and tokens must be >= 1, got batch={batch}, tokens={tokens}")
    bar = Progress(2 + len(backends), enabled=progress)
    model = DeepSeekW8A8(cfg).eval()
    ids = model.example_tokens(batch, tokens)
    bar.step("model built")

    compile_seconds, outputs, fns = {}, {}, {"eager": lambda: model(ids)}
    with torch.no_grad():
        torch._dynamo.reset()
        ref = logits_of(model(ids))
        backend_obj = None
        for name in backends:
            run = compile_model(model, ids, name)
            outputs[name], compile_seconds[name], fns[name] = \
                run.output, run.compile_seconds, run.call
            backend_obj = run.backend or backend_obj
            bar.step(f"{name} compiled")
        spread = time_interleaved_stats(fns, repeats)
        seconds = {name: st["median"] for name, st in spread.items()}
        bar.step("eager and compiled forwards timed")

    explanation = op_sdk.explain(backend_obj) if backend_obj is not None else None
    patterns = explanation.patterns if explanation else {}
    rows = explanation.table() if explanation else []
    misses = [dataclasses.asdict(m) for m in explanation.near_misses] if explanation else []
    err = lambda out: float((out.float() - ref.float()).abs().max())  # noqa: E731
    return DemoResult(
        config=dataclasses.asdict(cfg), batch=batch, tokens=tokens, patterns=patterns,
        fusion_rows=rows, near_misses=misses,
        max_abs_error=err(outputs["op_sdk"]) if "op_sdk" in outputs else float("nan"),
        max_abs_error_inductor=err(outputs["inductor"]) if "inductor" in outputs else float("nan"),
        ref_max_abs=float(ref.abs().max()), seconds=seconds, compile_seconds=compile_seconds,
        machine=machine_facts(), command=command, spread=spread)


@dataclasses.dataclass
class CompiledRun:
    output: torch.Tensor        # logits of the first (compiling) call
    compile_seconds: float      # that first call
    call: Callable[[], object]  # one more forward of the compiled model on the same input
    backend: object             # the op_sdk backend (its reports), None for Inductor


def demo_config():
    """The op_sdk backend's config in the demo and the benchmark: the defaults (max-autotune),
    plus ``experimental_config.frozen_parameter = True``, as a TorchAir inference script
    sets it: the weights do not change after the compile, so the compile may store int8
    matmul weights prepacked (the weight_prepack stage)."""
    import op_sdk

    cfg = op_sdk.CompilerConfig()
    cfg.experimental_config.frozen_parameter = True
    return cfg


def compile_model(model, ids, name: str) -> CompiledRun:
    """Compile ``model`` with ``name``: "op_sdk" (its backend, ``demo_config()``),
    "inductor" (torch.compile's default) or "inductor_cpp" (Inductor with its C++ wrapper,
    which op_sdk's max-autotune uses on CPU, and with its freezing, the counterpart of
    frozen_parameter: the strongest plain-Inductor contender). Inductor's FX graph cache is
    off so op_sdk's passes run (and report). Compiles with different backends live side by
    side (Dynamo guards on the backend); callers reset Dynamo between inputs."""
    import torch._inductor.config as inductor_config

    import op_sdk

    freezing = False
    if name == "op_sdk":
        backend = op_sdk.get_npu_backend(compiler_config=demo_config())
        compiled = torch.compile(model, backend=backend, dynamic=False)
    elif name in ("inductor", "inductor_cpp"):
        backend = None
        from op_sdk.compiler.executors import CPP_WRAPPER_PATCHES

        options = dict(CPP_WRAPPER_PATCHES) if name == "inductor_cpp" else None
        # Dynamo reads Inductor's freezing flag while it traces (to keep parameters as
        # graph attributes), so it is set around the first call, not in the options
        freezing = name == "inductor_cpp"
        compiled = torch.compile(model, backend="inductor", dynamic=False, options=options)
    else:
        raise ValueError(f"unknown contender {name!r}")
    start = time.perf_counter()
    with _fresh_inductor_cache(), inductor_config.patch(freezing=freezing):
        output = logits_of(compiled(ids))
    compile_seconds = time.perf_counter() - start
    return CompiledRun(output, compile_seconds, lambda: compiled(ids), backend)


@contextlib.contextmanager
def _fresh_inductor_cache():
    """Compile without Inductor's FX graph cache so the fusion passes run (and report)."""
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False):
        yield


def format_result(r: DemoResult) -> str:
    c = r.config
    lines = [
        f"op_sdk demo: DeepSeek-style W8A8 decoder, {c['layers']} layers, hidden {c['hidden']}, "
        f"{c['dtype']}, batch {r.batch} x {r.tokens} tokens, {r.machine['threads']} threads",
        "",
        "Fusions and weight prepacking (op_sdk backend: max-autotune, "
        "experimental_config.frozen_parameter=True):",
    ]
    header = f"  {'pattern':<36} {'matches':>7} {'nodes before':>12} {'after':>6} {'bytes saved':>12}"
    lines.append(header)
    for row in r.fusion_rows:
        lines.append(f"  {row['pattern']:<36} {row['matches']:>7} {row['nodes_before']:>12} "
                     f"{row['nodes_after']:>6} {_bytes(row['bytes_saved']):>12}")
    if not r.fusion_rows:
        lines.append("  (none)")
    if r.near_misses:
        lines.append("")
        lines.append("Near misses:")
        for m in r.near_misses[:10]:
            lines.append(f"  {m['fusion']}[{m['variant']}] at {m['node']}: {m['kind']}: {m['reason']}")
    lines += ["", f"Agreement with eager (logits up to {r.ref_max_abs:.3g}; tolerance: "
                  f"{TOLERANCE:.0%} of that, docs/usage.md):"]
    for name, (err, rel, ok) in r.agreement().items():
        lines.append(f"  max |{name} - eager| = {err:.4g} ({rel:.2%}): "
                     + ("within tolerance" if ok else "OUTSIDE the tolerance"))
    lines += ["", "Time per forward (median; interquartile range, min - max over "
                  f"{next(iter(r.spread.values()))['n'] if r.spread else 0} timed forwards):"]
    s = r.seconds
    for name in ("eager", "inductor", "op_sdk"):
        if name in s:
            label = {"eager": "eager", "inductor": "torch.compile (inductor)",
                     "op_sdk": "torch.compile (op_sdk backend)"}[name]
            st = r.spread.get(name)
            iqr = (f"  (IQR {st['q1'] * 1e3:.3f} - {st['q3'] * 1e3:.3f}, min - max "
                   f"{st['min'] * 1e3:.3f} - {st['max'] * 1e3:.3f})" if st else "")
            lines.append(f"  {label:<32} {s[name] * 1e3:9.3f} ms   x{s['eager'] / s[name]:.2f} "
                         f"vs eager{iqr}")
    if "op_sdk" in s and "inductor" in s:
        lines.append(f"  op_sdk vs inductor: x{s['inductor'] / s['op_sdk']:.2f}")
    return "\n".join(lines)


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def write_json(result: DemoResult, path: str) -> None:
    with open(path, "w") as f:
        json.dump(result.to_json(), f, indent=2)
