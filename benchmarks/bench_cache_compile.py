"""Start-up time with ``op_sdk.inference.cache_compile``: the first call of the embedded model
(``op_sdk.app.models.DeepSeekW8A8``, batch 1, op_sdk's default CompilerConfig) in a new
process, with and without the cache, each in a fresh Python process:

* ``save``: cache_compile with an empty cache and an empty Inductor cache (the first run ever);
* ``torch.compile, cold Inductor`` / ``torch.compile, warm Inductor``:
  ``torch.compile(model, backend=op_sdk's, dynamic=True, fullgraph=True)`` (what cache_compile
  compiles), its first run and a restart with Inductor's on-disk cache warm (a restart
  without cache_compile);
* ``load, warm Inductor``: cache_compile loading its cache, Inductor's cache warm (a restart);
* ``load, cold Inductor``: cache_compile loading its cache into an empty Inductor cache (the
  cache copied to a new machine without Inductor's).

Every scenario's logits are checked equal (bit for bit) to the first run's, and the steady
per-call time is recorded beside the first call's. Writes a JSON with the machine, the
versions and the command line.

    python benchmarks/bench_cache_compile.py [--layers 4] [--tokens 8] [--repeats 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

HERE = os.path.dirname(os.path.abspath(__file__))

_CHILD = textwrap.dedent("""
    import json, sys, time
    import torch
    import op_sdk
    from op_sdk.app.models import DecoderConfig, DeepSeekW8A8

    mode, cache_dir, layers, tokens, out = sys.argv[1:6]
    torch.set_grad_enabled(False)
    model = DeepSeekW8A8(DecoderConfig(layers=int(layers))).eval()
    ids = model.example_tokens(1, int(tokens))
    if mode == "torch.compile":
        run = torch.compile(model, backend=op_sdk.get_npu_backend(), dynamic=True,
                            fullgraph=True)
    else:
        run = op_sdk.inference.cache_compile(model.forward, cache_dir=cache_dir)
    start = time.perf_counter()
    logits = run(ids)
    first = time.perf_counter() - start
    steady = []
    for _ in range(10):
        start = time.perf_counter()
        run(ids)
        steady.append(time.perf_counter() - start)
    torch.save(logits, out)
    print(json.dumps({"first_call_s": first, "steady_s": sorted(steady)[5],
                      "loaded": getattr(run, "loaded", None)}))
""")


def _child(mode: str, cache_dir: str, inductor_dir: str, layers: int, tokens: int,
           out: str) -> dict:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=inductor_dir)
    proc = subprocess.run([sys.executable, "-c", _CHILD, mode, cache_dir, str(layers),
                           str(tokens), out], env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "bench_cache_compile.json"))
    args = parser.parse_args()

    import torch

    import op_sdk
    from op_sdk.app.machine import machine_facts

    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        reference = os.path.join(tmp, "reference.pt")
        for r in range(args.repeats):
            cache, inductor = os.path.join(tmp, f"cache{r}"), os.path.join(tmp, f"inductor{r}")
            order = [("save", "cache_compile", cache, inductor),
                     ("torch.compile, cold Inductor", "torch.compile", cache, inductor),
                     ("torch.compile, warm Inductor", "torch.compile", cache, inductor),
                     ("load, warm Inductor", "cache_compile", cache, inductor),
                     ("load, cold Inductor", "cache_compile", cache,
                      os.path.join(tmp, f"inductor{r}_cold"))]
            for name, mode, cache_dir, inductor_dir in order:
                out = os.path.join(tmp, "logits.pt")
                result = _child(mode, cache_dir, inductor_dir, args.layers, args.tokens, out)
                logits = torch.load(out)
                if not os.path.exists(reference):
                    os.replace(out, reference)
                    result["equal_to_first_run"] = True
                else:
                    result["equal_to_first_run"] = bool(torch.equal(logits, torch.load(reference)))
                runs.setdefault(name, []).append(result)
                print(f"repeat {r} {name}: {result}", flush=True)

    summary = {}
    for name, results in runs.items():
        summary[name] = {
            "first_call_s_median": statistics.median(x["first_call_s"] for x in results),
            "steady_ms_median": 1e3 * statistics.median(x["steady_s"] for x in results),
            "loaded": sorted({str(x["loaded"]) for x in results}),
            "equal_to_first_run": all(x["equal_to_first_run"] for x in results),
        }
    result = {
        "command": " ".join(["python", "benchmarks/bench_cache_compile.py"] + sys.argv[1:]),
        "date": datetime.date.today().isoformat(),
        "machine": machine_facts(),
        "versions": {"python": sys.version.split()[0], "torch": torch.__version__,
                     "op_sdk": op_sdk.__version__},
        "model": {"name": "DeepSeekW8A8", "layers": args.layers, "batch": 1, "tokens": args.tokens,
                  "config": "op_sdk.CompilerConfig() (the default, max-autotune)"},
        "repeats": args.repeats,
        "summary": summary,
        "runs": runs,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
