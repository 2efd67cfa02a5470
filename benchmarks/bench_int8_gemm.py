"""npu_quant_matmul's int8 GEMM per instruction-set path, against a cache-resident copy of
its weight: for each path (a fresh process with OP_SDK_CPU_ISA and oneDNN's / ATen's ISA
caps set, so every contender sees the same CPU), the operator on an (n, k) int8 weight
passed as ``w.t()`` (bf16 output, per-channel and per-token scales), the same on the
weight packed by ``op_sdk::pack_quant_weight`` (what frozen_parameter uses), ATen's int8
GEMM alone (``torch._int_mm``), and ``.copy_`` of the weight into a second buffer (both
stay in the caches when they fit). Times: the minimum and the median of ``--calls`` calls
(the minimum is the better estimate on a shared machine); each row names the kernel that
ran (op_sdk._native.int8_gemm).

    python benchmarks/bench_int8_gemm.py --paths avx2 avx2_vnni avx512 \\
        --out benchmarks/results/bench_int8_gemm.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys

# path -> the environment of its process (the caps of the contenders follow the path)
PATHS = {
    "avx2": {"OP_SDK_CPU_ISA": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
             "ATEN_CPU_CAPABILITY": "avx2"},
    "avx2_vnni": {"OP_SDK_CPU_ISA": "avx2_vnni", "ONEDNN_MAX_CPU_ISA": "AVX2_VNNI",
                  "ATEN_CPU_CAPABILITY": "avx2"},
    "avx512": {"OP_SDK_CPU_ISA": "avx512"},
    # AVX-512 VNNI without AMX (Ice Lake, AMD Zen 4 / 5), on a CPU that has AMX too
    "avx512_no_amx": {"OP_SDK_CPU_ISA": "avx512", "OP_SDK_AMX": "0",
                      "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_BF16"},
}

_CHILD = r"""
import json, sys, time, torch, op_sdk
from op_sdk import _native
from op_sdk.app.machine import machine_facts
shapes, calls, threads = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.set_num_threads(threads)
npu, ops = torch.ops.npu, torch.ops.op_sdk

def timed(fn):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return {"min_us": ts[0] * 1e6, "median_us": ts[len(ts) // 2] * 1e6}

rows = []
torch.manual_seed(0)
with torch.inference_mode():
    for m, k, n in shapes:
        w = torch.randint(-128, 128, (n, k), dtype=torch.int8)
        x2, dst = w.t(), torch.empty_like(w)
        packed = ops.pack_quant_weight(x2)
        x1 = torch.randint(-128, 128, (m, k), dtype=torch.int8)
        s, pt = torch.rand(n), torch.rand(m)
        kw = {"pertoken_scale": pt, "output_dtype": torch.bfloat16}
        row = {"m": m, "k": k, "n": n, "weight_bytes": w.nbytes,
               "kernel": _native.int8_gemm(m), "kernel_packed": _native.int8_gemm(m, True),
               "npu_quant_matmul": timed(lambda: npu.npu_quant_matmul(x1, x2, s, **kw)),
               "quant_matmul_packed": timed(lambda: ops.quant_matmul_packed(x1, x2, packed, s, **kw)),
               "aten_int_mm": timed(lambda: torch._int_mm(x1, x2)),
               "weight_copy": timed(lambda: dst.copy_(w))}
        row["npu_quant_matmul_over_copy"] = (row["npu_quant_matmul"]["min_us"]
                                             / row["weight_copy"]["min_us"])
        rows.append(row)
print(json.dumps({"machine": machine_facts(threads), "rows": rows}))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS))
    p.add_argument("--shapes", nargs="+", default=["1x1024x5632", "8x1024x5632",
                                                   "16x1024x5632", "8x7168x2048"],
                   help="m x k x n")
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="benchmarks/results/bench_int8_gemm.json")
    args = p.parse_args()
    shapes = [[int(v) for v in s.split("x")] for s in args.shapes]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = {}
    for path in args.paths:
        env = dict(os.environ, PYTHONPATH=root, **PATHS[path])
        out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(shapes), str(args.calls),
                              str(args.threads)], env=env, capture_output=True, text=True,
                             check=True, cwd=root)
        results[path] = json.loads(out.stdout.strip().splitlines()[-1])
        results[path]["env"] = PATHS[path]
        for r in results[path]["rows"]:
            print(f"{path:<10} {r['m']:>3} x {r['k']:>5} x {r['n']:>5}  {r['kernel']:<11} "
                  f"{r['npu_quant_matmul']['min_us']:9.1f} us  packed ({r['kernel_packed']}) "
                  f"{r['quant_matmul_packed']['min_us']:9.1f} us  _int_mm "
                  f"{r['aten_int_mm']['min_us']:9.1f} us  weight copy "
                  f"{r['weight_copy']['min_us']:7.1f} us  ->  {r['npu_quant_matmul_over_copy']:.2f}x",
                  flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"benchmark": "bench_int8_gemm",
                   "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                   "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
                   "settings": {"calls": args.calls, "threads": args.threads},
                   "paths": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
