"""Where the embedded model's forward spends its GPU time under torch.compile's default
backend and under op_sdk's (op_sdk's operators traced for Inductor in both): the kernels by
CUDA time (torch.profiler, ``--iters`` forwards), the kernel launches per forward, the GPU
time against the wall time per forward, and op_sdk's compile summary. Writes
``<out>.json`` and prints the tables.

    python benchmarks/profile_e2e_cuda.py [--tokens 64] [--out benchmarks/results/profile_e2e_cuda]
"""

from __future__ import annotations

import argparse
import os

import torch


def _profile(fn, iters):
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    kernels = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            k = kernels.setdefault(e.name, [0, 0.0])
            k[0] += 1
            k[1] += e.device_time
    rows = sorted(({"kernel": n[:120], "calls_per_forward": c / iters,
                    "us_per_forward": t / iters} for n, (c, t) in kernels.items()),
                  key=lambda r: -r["us_per_forward"])
    return {"launches_per_forward": sum(r["calls_per_forward"] for r in rows),
            "gpu_us_per_forward": sum(r["us_per_forward"] for r in rows), "kernels": rows}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "profile_e2e_cuda"))
    args = p.parse_args(argv)
    import triton
    import triton.testing

    from op_sdk.app.demo import compile_model
    from op_sdk.app.triton_bench import record, write
    from op_sdk.app.models import DecoderConfig, DeepSeekW8A8

    cfg = DecoderConfig()
    model = DeepSeekW8A8(cfg).eval().cuda()
    ids = model.example_tokens(args.batch, args.tokens).cuda()
    res = record("profile_e2e_cuda", batch=args.batch, tokens=args.tokens, contenders={})
    with torch.no_grad():
        for name in ("inductor", "op_sdk"):
            torch._dynamo.reset()
            run = compile_model(model, ids, name)
            r = _profile(run.call, args.iters)
            r["wall_ms_per_forward"] = triton.testing.do_bench(run.call, rep=200,
                                                               return_mode="median")
            if run.backend is not None:
                r["compile_summary"] = [rep.summary() for rep in run.backend.reports]
            res["contenders"][name] = r
            print(f"== {name}: {r['wall_ms_per_forward']:.3f} ms wall, "
                  f"{r['gpu_us_per_forward']:.0f} us GPU, "
                  f"{r['launches_per_forward']:.0f} launches per forward")
            for k in r["kernels"][:args.top]:
                print(f"  {k['us_per_forward']:8.1f} us {k['calls_per_forward']:5.1f}x  {k['kernel']}")
            for s in r.get("compile_summary", []):
                print(s)
    write(args.out, res)


if __name__ == "__main__":
    main()
