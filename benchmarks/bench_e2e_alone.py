"""End to end, one model per process: each contender compiles and runs the embedded model in
a fresh process of its own, as a server runs one model, so no other contender's weights
share the caches (``op-sdk bench`` times all contenders in one process, interleaved).
Processes run one after another, contenders in turn per round, ``--rounds`` rounds;
reported: the median over rounds of each process's median ms per forward.

    python benchmarks/bench_e2e_alone.py --tokens 1 4 16 --rounds 2 \\
        --out benchmarks/results/e2e_alone.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CONTENDERS = ("inductor", "inductor_cpp", "op_sdk")

_CHILD = """
import json, statistics, sys, time, torch
from op_sdk.app.demo import compile_model
from op_sdk.app.models import DecoderConfig, DeepSeekW8A8
name, tokens, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
model = DeepSeekW8A8(DecoderConfig()).eval()
ids = model.example_tokens(1, tokens)
with torch.no_grad():
    run = compile_model(model, ids, name)
    for _ in range(10):
        run.call()
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        run.call()
        ts.append(time.perf_counter() - t)
print(json.dumps({"ms": statistics.median(ts) * 1e3}))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root)
    rows = []
    for tokens in args.tokens:
        ms = {name: [] for name in CONTENDERS}
        for _ in range(args.rounds):
            for name in CONTENDERS:
                out = subprocess.run([sys.executable, "-c", _CHILD, name, str(tokens),
                                      str(args.calls)], env=env, capture_output=True,
                                     text=True, check=True)
                ms[name].append(json.loads(out.stdout.strip().splitlines()[-1])["ms"])
        med = {name: statistics.median(v) for name, v in ms.items()}
        row = {"tokens": tokens, "ms": med, "runs": ms,
               "speedup_vs_inductor": med["inductor"] / med["op_sdk"],
               "speedup_vs_inductor_cpp": med["inductor_cpp"] / med["op_sdk"]}
        rows.append(row)
        print(f"{tokens:>4} tokens: " + "  ".join(f"{n} {med[n]:.3f} ms" for n in CONTENDERS)
              + f"  op_sdk vs inductor {row['speedup_vs_inductor']:.2f}x, "
              f"vs inductor_cpp {row['speedup_vs_inductor_cpp']:.2f}x", flush=True)
    if args.out:
        from op_sdk.app.machine import machine_facts

        with open(args.out, "w") as f:
            json.dump({"rows": rows, "machine": machine_facts(),
                       "command": "python benchmarks/bench_e2e_alone.py "
                                  + " ".join(argv if argv is not None else sys.argv[1:])},
                      f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
