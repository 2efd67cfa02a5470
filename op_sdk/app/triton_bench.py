"""The Triton kernels on a CUDA GPU against their alternatives, in one run.

For every operator whose CUDA kernel is a Triton kernel and that declares a Benchmark, at
T (rows) x H (hidden) x dtype:

* ``fused``    the operator on CUDA tensors (its Triton kernel, through the dispatcher);
* ``eager``    its unfused baseline in eager mode (the Benchmark's ``unfused``, else the
               plain-PyTorch reference);
* ``compiled`` torch.compile (default Inductor backend, dynamic=False) of the plain-PyTorch
               composite (the reference): Inductor's own generated Triton;
* ``copy``     a device-to-device .copy_ of the same number of bytes (half read, half
               written): the copy-bandwidth roofline of the case.

Every column is timed as the replay of a CUDA graph holding one call
(``triton.testing.do_bench_cudagraph``, median), so Python and launch overheads are out of
all four alike (except an operator kept one call under torch.compile, ``inline=False``,
whose launcher and reference check values on the host: its ``fused`` and ``eager`` are
timed from Python, listed in the row's ``timed_from_python``); ``fused_launch_us`` also
gives the operator called from Python (``triton.testing.do_bench``, median, L2 flushed
between calls), and ``inlined_launch_us``
the operator in a torch.compile'd function called from Python (traced: Inductor's code
launches the kernel, library.INLINE_DEVICES). GB/s come from an analytic
byte count: every input read once and every output written once. The GPU's copy bandwidth
is measured on a 256 MiB tensor. Writes ``<out>.json`` (GPU, versions, command).

    python benchmarks/bench_triton.py [--quick] [--out benchmarks/results/bench_triton_h100]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time

import torch

FULL_T, FULL_H = (1, 257, 4096), (4096, 7168)
QUICK_T, QUICK_H = (4096,), (4096,)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def _cuda(obj):
    if isinstance(obj, torch.Tensor):
        return obj.cuda()
    if isinstance(obj, tuple):
        return tuple(_cuda(o) for o in obj)
    if isinstance(obj, dict):
        return {k: _cuda(v) for k, v in obj.items()}
    return obj


def copy_bandwidth(nbytes: int = 256 << 20) -> float:
    """GB/s of a device-to-device copy, counting bytes read plus bytes written."""
    import triton.testing

    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench_cudagraph(lambda: dst.copy_(src), rep=200, return_mode="median")
    return 2 * nbytes / ms / 1e6


def record(benchmark: str, **fields) -> dict:
    """The head of every GPU results file (this benchmark's and benchmarks/sweep_*.py,
    bench_e2e_cuda.py, profile_e2e_cuda.py): the benchmark, the command, the date, the GPU
    and the versions, then ``fields`` (one may replace a head entry: this benchmark's ``gpu``
    is a dict of the device's properties)."""
    import triton

    import op_sdk

    return {"benchmark": benchmark,
            "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "versions": {"torch": torch.__version__, "triton": triton.__version__,
                         "op_sdk": op_sdk.__version__},
            **fields}


def sweep_inputs(opdef, t: int, h: int, dtype=torch.bfloat16):
    """The operator's first Benchmark's call at T x H on the GPU (seed 0): (args, kwargs)."""
    torch.manual_seed(0)
    return _cuda(opdef.benchmarks[0].make(t, h, dtype))


def timed(fn, what: str, rep: int = 30) -> float | None:
    """Microseconds of ``fn`` (median CUDA-graph replay, ``rep`` ms), or None where it cannot
    run (a launch geometry with too many registers, ...): the reason printed with ``what``."""
    import triton.testing

    try:
        fn()
        return 1e3 * triton.testing.do_bench_cudagraph(fn, rep=rep, return_mode="median")
    except Exception as exc:  # reported, the sweep goes on
        print(f"  {what}: {type(exc).__name__}")
        return None


def _timed(fn, rep: int, host: bool) -> float:
    """Microseconds of ``fn``: the median CUDA-graph replay, or with ``host`` (``fn`` reads a
    value back to the host, which a graph cannot capture) the median call from Python, L2
    flushed between calls (``do_bench``)."""
    import triton.testing

    bench = triton.testing.do_bench if host else triton.testing.do_bench_cudagraph
    return 1e3 * bench(fn, rep=rep, return_mode="median")


def write(out: str, result: dict) -> str:
    """``result`` as ``<out>.json`` (its folder made); returns the path."""
    path = out + ".json"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1, default=str)
    return path


def cases():
    import op_sdk
    from op_sdk.app.kernel_bench import Case

    return [Case(o, b) for o in op_sdk.registered_ops() for b in o.benchmarks
            if getattr(o.kernels.get("cuda"), "kind", None) == "triton"]


def run(args) -> dict:
    import triton
    import triton.testing

    from op_sdk.app.kernel_bench import analytic_bytes

    torch._dynamo.config.cache_size_limit = 1024
    ts, hs = (QUICK_T, QUICK_H) if args.quick else (FULL_T, FULL_H)
    ts, hs = args.T or ts, args.H or hs
    started = time.time()
    bw = copy_bandwidth()
    rows = []
    for case in cases():
        if args.ops and case.op not in args.ops:
            continue
        spec, fused = case.spec, case.opdef.op
        compiled = torch.compile(spec.composite or case.opdef.reference, dynamic=False)
        # the operator inside a compiled graph: traced, Inductor launches its kernel
        inlined = torch.compile(lambda *a, **k: fused(*a, **k), dynamic=False)
        unfused = spec.unfused or case.opdef.reference
        for dt in (DTYPES[d] for d in args.dtypes):
            for t in ts:
                for h in hs:
                    torch.manual_seed(0)
                    a, kw = _cuda(spec.make(t, h, dt))
                    with torch.inference_mode():
                        out = fused(*a, **kw)
                        read = [x for i, x in enumerate(a) if i not in spec.unread]
                        nbytes = analytic_bytes(read, kw, out)
                        src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
                        dst = torch.empty_like(src)
                        fns = {"fused": lambda: fused(*a, **kw),
                               "eager": lambda: unfused(*a, **kw),
                               "compiled": lambda: compiled(*a, **kw),
                               "copy": lambda: dst.copy_(src)}
                        for f in fns.values():
                            f()
                        torch.cuda.synchronize()
                        # an operator kept one call (inline=False) checks values on the
                        # host, as its reference does: neither fits in a CUDA graph
                        host = {"fused", "eager"} if case.opdef.inline is None else set()
                        us = {k: _timed(f, args.rep, k in host) for k, f in fns.items()}
                        launch = 1e3 * triton.testing.do_bench(fns["fused"], rep=args.rep,
                                                               return_mode="median")
                        inlined(*a, **kw)
                        inlined_launch = 1e3 * triton.testing.do_bench(
                            lambda: inlined(*a, **kw), rep=args.rep, return_mode="median")
                    row = {"op": case.op, "dtype": str(dt).replace("torch.", ""), "T": t,
                           "H": h, "bytes": nbytes,
                           **{f"{k}_us": v for k, v in us.items()},
                           "fused_launch_us": launch,
                           "inlined_launch_us": inlined_launch,
                           "fused_GBps": nbytes / us["fused"] / 1e3,
                           "fused_pct_of_copy_bw": 100 * nbytes / us["fused"] / 1e3 / bw,
                           "speedup_vs_eager": us["eager"] / us["fused"],
                           "speedup_vs_compiled": us["compiled"] / us["fused"],
                           "eager_baseline": spec.unfused_name,
                           "timed_from_python": sorted(host)}
                    rows.append(row)
                    print(f"{row['op']:<31} {row['dtype']:<9} {t:>5} {h:>5} "
                          f"fused {us['fused']:8.1f} us  eager {us['eager']:8.1f}  "
                          f"compiled {us['compiled']:8.1f}  copy {us['copy']:8.1f}  "
                          f"{row['fused_GBps']:7.0f} GB/s ({row['fused_pct_of_copy_bw']:4.0f}% "
                          f"of copy)  x{row['speedup_vs_compiled']:.2f} vs compiled", flush=True)
        torch._dynamo.reset()
    props = torch.cuda.get_device_properties(0)
    return record(
        "bench_triton",
        gpu={"name": props.name, "sms": props.multi_processor_count,
             "memory_GiB": round(props.total_memory / 2**30, 1),
             "driver_cuda": torch.version.cuda},
        settings={"quick": args.quick, "T": list(ts), "H": list(hs), "dtypes": args.dtypes,
                  "timing": "median CUDA-graph replay (triton.testing.do_bench_cudagraph), "
                            f"rep={args.rep} ms; fused_launch_us, inlined_launch_us: "
                            "do_bench from Python",
                  "compile": "torch.compile(reference or composite, dynamic=False), default Inductor"},
        copy_GBps=bw, wall_s=time.time() - started, results=rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="T = H = 4096 only")
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "bench_triton"))
    p.add_argument("--ops", nargs="*", help="only these operators")
    p.add_argument("--T", type=int, nargs="*", help="rows (default: 1 257 4096; --quick 4096)")
    p.add_argument("--H", type=int, nargs="*", help="hidden sizes (default: 4096 7168; --quick 4096)")
    p.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=list(DTYPES))
    p.add_argument("--rep", type=int, default=100, help="ms of timed replays per variant")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        raise SystemExit("bench_triton: needs a CUDA GPU (the Triton kernels' CPU check is "
                         "the interpreter tests, tests/triton)")
    result = run(args)
    write(args.out, result)
    print(f"\nGPU copy bandwidth (256 MiB .copy_, read + write): {result['copy_GBps']:.0f} GB/s; "
          f"wrote {args.out}.json")


if __name__ == "__main__":
    main()
