"""Multi-stream against single-stream on CPU: the DeepSeek-style MoE block of
examples/moe_multistream.py, compiled by op_sdk's backend in each mode (reduce-overhead:
the graph's operators on the stream executor; max-autotune: one Inductor partition per
stream region on it), once as it is (one stream) and once with the custom pass that puts
its shared expert on a second stream (a worker thread beside the routed experts).

Each ``--stream-threads`` value (the worker's intra-op threads, OP_SDK_STREAM_THREADS) runs
in a process of its own, since a worker keeps its count for the life of the process. In a
process the two contenders are sampled round-robin (op_sdk.app.timing.measure: a round in
which other processes used the CPU is measured again, up to 4 times, and counted as
contended if it stays so); reported: median and minimum ms per forward, the speedup of
the medians, the contended rounds, and the machine's load before the run.

    python benchmarks/bench_multistream.py --tokens 32 128 512 --stream-threads 1 2 \\
        --modes reduce-overhead max-autotune --out benchmarks/results/multistream.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = """
import json, sys, torch
sys.path.insert(0, sys.argv[1])
from moe_multistream import MoEBlock, compile_block
from op_sdk.app.timing import measure
tokens, repeats, mode = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
block = MoEBlock().eval()
x = torch.randn(1, tokens, 1024, generator=torch.Generator().manual_seed(0))
with torch.no_grad():
    single, _ = compile_block(block, multi_stream=False, mode=mode)
    multi, _ = compile_block(block, multi_stream=True, mode=mode)
    ref = single(x)
    torch.testing.assert_close(multi(x), ref, rtol=1e-5, atol=1e-5)
    res = measure({"single_stream": lambda: single(x), "multi_stream": lambda: multi(x)},
                  repeats=repeats, quiet_timeout=0)
print(json.dumps(res))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, nargs="+", default=[32, 128, 512])
    ap.add_argument("--stream-threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--modes", nargs="+", default=["reduce-overhead", "max-autotune"],
                    choices=["reduce-overhead", "max-autotune"])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from op_sdk.app.timing import cpu_busy

    load_before = cpu_busy(1.0)
    rows = []
    for mode, threads in ((m, t) for m in args.modes for t in args.stream_threads):
        env = dict(os.environ, PYTHONPATH=root, OP_SDK_STREAM_THREADS=str(threads))
        for tokens in args.tokens:
            out = subprocess.run([sys.executable, "-c", _CHILD, os.path.join(root, "examples"),
                                  str(tokens), str(args.repeats), mode], env=env,
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise RuntimeError(out.stderr[-3000:])
            res = json.loads(out.stdout.strip().splitlines()[-1])
            med = {k: v * 1e3 for k, v in res["median_s"].items()}
            row = {"mode": mode, "tokens": tokens, "stream_threads": threads, "median_ms": med,
                   "min_ms": {k: v * 1e3 for k, v in res["min_s"].items()},
                   "speedup": med["single_stream"] / med["multi_stream"],
                   "contended_rounds": res["contended_rounds"], "rounds": args.repeats}
            rows.append(row)
            print(f"{mode}, stream threads {threads}, {tokens:>4} tokens: single {med['single_stream']:.2f} ms"
                  f", multi {med['multi_stream']:.2f} ms, speedup {row['speedup']:.2f}x "
                  f"({row['contended_rounds']}/{args.repeats} rounds contended)", flush=True)
    if args.out:
        from op_sdk.app.machine import machine_facts

        note = ("the machine is shared: other processes used "
                f"{load_before:.0%} of its CPU time in the second before the run, and "
                "contended_rounds counts the rounds measured while they ran")
        with open(args.out, "w") as f:
            json.dump({"rows": rows, "machine": machine_facts(), "load_before": load_before,
                       "note": note,
                       "command": "python benchmarks/bench_multistream.py "
                                  + " ".join(argv if argv is not None else sys.argv[1:])},
                      f, indent=1)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
