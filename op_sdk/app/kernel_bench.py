"""The fused CPU kernels (op_sdk._C) against their unfused and compiled alternatives.

For every fused operator, at T (rows) x H (hidden) x dtype, in one run and interleaved
round by round so that drifts of a shared machine hit every column alike:

* ``fused``    the operator (the native kernel);
* ``eager``    the unfused baseline in eager mode: the chain of npu ops the fusion replaces
               (e.g. npu_add_rms_norm then npu_dynamic_quant), or the plain-PyTorch
               composite (the operator's reference) for a single-step operator;
* ``compiled`` torch.compile (default Inductor backend, dynamic=False, one compile per
               shape) of the plain-PyTorch composite, i.e. the operator's reference;
* ``copy``     a .copy_ moving the same number of bytes (half read, half written): the
               copy-bandwidth roofline of that case.

Times are medians over repeats (each repeat the mean of enough calls to take >= 2 ms);
GB/s come from an analytic byte count: every input read once and every output written
once (x1, x2 read and x_out, y written for npu_add_rms_norm_dynamic_quant: 7 bytes per
element in bf16). Also measured: the machine's copy bandwidth on a large tensor.

Writes ``<out>.json`` and ``<out>.csv`` (machine, threads, versions, date, command) and
prints a table.

    python benchmarks/bench_kernels.py [--quick] [--threads 2] [--out benchmarks/results/bench_kernels]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

import op_sdk
from op_sdk.library import Benchmark, OpDef
from op_sdk.app.machine import machine_facts
from op_sdk import _native
from op_sdk.app.timing import copy_of, machine_copy_bandwidth, measure

# the int8 matmuls, whose rows name the GEMM kernel that ran (op_sdk._native.int8_gemm):
# operator -> on a packed weight
INT8_GEMM_OPS = {"npu_quant_matmul": False, "op_sdk.quant_matmul_packed": True}



# ---- the cases: every operator's Benchmark declarations (op_sdk.library.Benchmark) ----------

@dataclass(frozen=True)
class Case:
    """One timed case: an operator and one of its Benchmark declarations."""

    opdef: OpDef
    spec: Benchmark

    @property
    def op(self) -> str:
        """How the results name the operator: its name, prefixed by any namespace but npu."""
        o = self.opdef
        return o.name if o.namespace == "npu" else f"{o.namespace}.{o.name}"


def cases() -> list[Case]:
    """The suite, in registry order: every registered operator's benchmark declarations
    (the SDK's and any plugin's imported before)."""
    return [Case(o, b) for o in op_sdk.registered_ops() for b in o.benchmarks]


FULL_T, FULL_H = (1, 16, 257, 4096), (2048, 4096, 7168)
QUICK_T, QUICK_H = (1, 4096), (4096,)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


# ---- timing -----------------------------------------------------------------------------

def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _tensors(o)]
    return []


def analytic_bytes(args, kwargs, outputs) -> int:
    """Every input tensor read once plus every output tensor written once."""
    return sum(t.nbytes for t in _tensors(args) + _tensors(kwargs) + _tensors(outputs))


def bind(fn, args, kwargs) -> Callable:
    return lambda: fn(*args, **kwargs)


# ---- the run ----------------------------------------------------------------------------

def run(args) -> dict:
    import torch._inductor.config as inductor_config

    torch.set_num_threads(args.threads)
    torch._dynamo.config.cache_size_limit = 1024  # one compiled specialisation per shape
    torch._dynamo.config.accumulated_cache_size_limit = 1 << 16
    ts, hs = (QUICK_T, QUICK_H) if args.quick else (FULL_T, FULL_H)
    dtypes = [DTYPES[d] for d in args.dtypes]
    selected = [c for c in cases() if not args.ops or c.op in args.ops]
    started = time.time()
    copy_bw_start = machine_copy_bandwidth()
    rows = []
    for case in selected:
        spec, fused = case.spec, case.opdef.op
        compiled = torch.compile(spec.composite or case.opdef.reference, dynamic=False)
        unfused = spec.unfused or case.opdef.reference
        shapes = spec.shapes or tuple((t, h) for h in hs for t in ts)
        if spec.shapes and args.quick:
            shapes = (shapes[0], shapes[-1])
        for dt in dtypes:
            for t, h in shapes:
                torch.manual_seed(0)
                a, kw = spec.make(t, h, dt)
                with torch.inference_mode():
                    out = fused(*a, **kw)
                    read = [x for i, x in enumerate(a) if i not in spec.unread]
                    nbytes = analytic_bytes(read, kw, out)
                    t0 = time.perf_counter()
                    # Inductor's on-disk graph cache is not keyed by ATEN_CPU_CAPABILITY:
                    # a graph cached by a run at another ISA cap is code for other vector
                    # widths (wrong results, heap overruns), so compile afresh
                    with inductor_config.patch(fx_graph_cache=False):
                        compiled(*a, **kw)
                    compile_s = time.perf_counter() - t0
                    fns = {"fused": bind(fused, a, kw), "eager": bind(unfused, a, kw),
                           "compiled": bind(compiled, a, kw), "copy": copy_of(nbytes)}
                    for f in fns.values():  # warm up
                        f()
                        f()
                    m = measure(fns, args.repeats, args.wait_quiet)
                med = m["median_s"]
                row = {
                    "op": case.op, "dtype": str(dt).replace("torch.", ""), "T": t, "H": h,
                    "N": spec.n, "bytes": nbytes,
                    "fused_us": med["fused"] * 1e6, "eager_us": med["eager"] * 1e6,
                    "compiled_us": med["compiled"] * 1e6, "copy_us": med["copy"] * 1e6,
                    "fused_min_us": m["min_s"]["fused"] * 1e6,
                    "fused_GBps": nbytes / med["fused"] / 1e9,
                    "copy_GBps": nbytes / med["copy"] / 1e9,
                    "speedup_vs_eager": med["eager"] / med["fused"],
                    "speedup_vs_compiled": med["compiled"] / med["fused"],
                    "fused_over_copy": med["fused"] / med["copy"],
                    "compile_s": compile_s, "eager_baseline": spec.unfused_name,
                    "compiled_composite": "reference" if spec.composite is None
                    else spec.unfused_name.replace(" (eager)", ""),
                    "contended_rounds": m["contended_rounds"],
                }
                if case.op in INT8_GEMM_OPS:  # which int8 GEMM ran (OP_SDK_CPU_ISA applied)
                    row["kernel"] = _native.int8_gemm(t, INT8_GEMM_OPS[case.op])
                rows.append(row)
                print_row(row, header=len(rows) == 1)
        torch._dynamo.reset()
    copy_bw_end = machine_copy_bandwidth()
    return {
        "benchmark": "bench_kernels",
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": machine_facts(args.threads),
        "versions": {"torch": torch.__version__, "op_sdk": op_sdk.__version__},
        "env": {k: os.environ[k] for k in ("OP_SDK_CPU_ISA", "ONEDNN_MAX_CPU_ISA",
                                           "ATEN_CPU_CAPABILITY", "OP_SDK_CPU_HUGEPAGES",
                                           "OP_SDK_CPU_STREAM", "OP_SDK_CPU_POOL_MB", "GLIBC_TUNABLES",
                                           "THP_MEM_ALLOC_ENABLE", "OMP_NUM_THREADS",
                                           "LD_PRELOAD") if k in os.environ},
        "settings": {"quick": args.quick, "repeats": args.repeats, "wait_quiet_s": args.wait_quiet,
                     "dtypes": args.dtypes, "T": list(ts), "H": list(hs),
                     "compile": "torch.compile(reference, dynamic=False), default Inductor, FX graph cache off",
                     "timing": "median of repeats, round-robin over fused/eager/compiled/copy, "
                               "torch.inference_mode"},
        "machine_copy_GBps": {"start": copy_bw_start, "end": copy_bw_end,
                              "bytes_per_copy": 2 * (256 << 20)},
        "wall_s": time.time() - started,
        "output_pool": _native.cpu_output_pool(),  # the native kernels' (docs/architecture.md)
        "results": rows,
    }


COLUMNS = [("op", "{:<31}"), ("dtype", "{:<9}"), ("T", "{:>5}"), ("H", "{:>5}"), ("N", "{:>5}"),
           ("fused_us", "{:>10.1f}"), ("eager_us", "{:>10.1f}"), ("compiled_us", "{:>11.1f}"),
           ("speedup_vs_eager", "{:>7.2f}x"), ("speedup_vs_compiled", "{:>7.2f}x"),
           ("fused_GBps", "{:>7.1f}"), ("copy_GBps", "{:>7.1f}"), ("fused_over_copy", "{:>6.2f}")]
HEADERS = ["op", "dtype", "T", "H", "N", "fused us", "eager us", "compiled us", "vs eager",
           "vs comp.", "GB/s", "copy", "/copy"]


def print_row(row: dict, header=False) -> None:
    if header:
        widths = [len(fmt.format(row[k] if row[k] is not None else "-")) for k, fmt in COLUMNS]
        print(" ".join(h.rjust(w) if i > 1 else h.ljust(w)
                       for i, (h, w) in enumerate(zip(HEADERS, widths))))
    busy = row["contended_rounds"]
    cells = [fmt.format(row[k]) if row[k] is not None else fmt.format("-")
             for k, fmt in COLUMNS]
    print(" ".join(cells) +
          (f"  ({busy} busy rounds)" if busy else ""), flush=True)


def run_kernel_bench(quick: bool = False, threads: int = 2, repeats: int = 15) -> dict:
    """The suite as a function (``op-sdk bench`` calls it): the same dict main() writes."""
    args = argparse.Namespace(quick=quick, threads=threads, ops=None, dtypes=list(DTYPES),
                              repeats=repeats, wait_quiet=0.0)
    return run(args)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="T in (1, 4096), H = 4096 only")
    p.add_argument("--threads", type=int, default=2, help="intra-op threads (default 2)")
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "bench_kernels"),
                   help="output path without extension; writes .json and .csv")
    p.add_argument("--ops", nargs="*", help="only these operators")
    p.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=list(DTYPES))
    p.add_argument("--repeats", type=int, default=15, help="timed samples per variant")
    p.add_argument("--wait-quiet", type=float, default=0.0, metavar="SECONDS",
                   help="before each case, and before measuring again a round that another "
                        "process disturbed, wait up to this long for an idle machine")
    args = p.parse_args(argv)
    result = run(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    with open(args.out + ".csv", "w", newline="") as f:
        # every row's keys, in first-seen order (only the matmul rows name a kernel)
        fields = list(dict.fromkeys(k for row in result["results"] for k in row))
        w = csv.DictWriter(f, fieldnames=fields, restval="")
        w.writeheader()
        w.writerows(result["results"])
    bw = result["machine_copy_GBps"]
    print(f"\nmachine copy bandwidth (256 MiB .copy_): {bw['start']:.1f} GB/s at start, "
          f"{bw['end']:.1f} GB/s at end; {result['wall_s']:.0f} s in all")
    print(f"wrote {args.out}.json and {args.out}.csv")


if __name__ == "__main__":
    main()
