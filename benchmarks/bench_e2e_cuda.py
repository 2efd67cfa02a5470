"""The embedded model (op-sdk demo's DeepSeek-style W8A8 decoder) on a CUDA GPU: eager,
torch.compile's default backend and op_sdk's backend, each with op_sdk's operators traced
for Inductor (the default on CUDA) and left opaque calls, time per forward (CUDA events,
median), and the agreement with eager. Writes ``<out>.json``.

    python benchmarks/bench_e2e_cuda.py [--tokens 64] [--out benchmarks/results/e2e_cuda]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os

import torch


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "e2e_cuda"))
    args = p.parse_args(argv)
    import triton
    import triton.testing

    import op_sdk
    from op_sdk.app.demo import compile_model, logits_of
    from op_sdk.app.triton_bench import record, write
    from op_sdk.app.models import DecoderConfig, DeepSeekW8A8

    cfg = DecoderConfig()
    model = DeepSeekW8A8(cfg).eval().cuda()
    ids = model.example_tokens(args.batch, args.tokens).cuda()
    res = record("bench_e2e_cuda", model=dataclasses.asdict(cfg), batch=args.batch,
                 tokens=args.tokens,
                 timing="median of triton.testing.do_bench (CUDA events), rep 300 ms",
                 ms_per_forward={}, max_abs_error={}, compile_s={})
    from op_sdk import library

    # "opaque ops": each op_sdk operator left one call in the compiled graph (its launcher
    # run from Python), instead of traced for Inductor (library.INLINE_DEVICES)
    contenders = (("inductor", True), ("op_sdk", True), ("inductor", False), ("op_sdk", False))
    res["errors"] = {}
    with torch.no_grad():
        ref = logits_of(model(ids))
        for name, inline in contenders:
            label = name if inline else f"{name} (opaque ops)"
            torch._dynamo.reset()
            if not inline:
                library.INLINE_DEVICES.discard("cuda")
            try:
                run = compile_model(model, ids, name)
            except Exception as exc:  # reported, the other contenders still measured
                res["errors"][label] = f"{type(exc).__name__}: {str(exc)[:2000]}"
                continue
            finally:
                library.INLINE_DEVICES.add("cuda")
            res["compile_s"][label] = run.compile_seconds
            res["max_abs_error"][label] = float((run.output.float() - ref.float()).abs().max())
            if name == "op_sdk" and inline:
                res["fusions"] = op_sdk.explain(run.backend).table()
            res["ms_per_forward"][label] = triton.testing.do_bench(run.call, rep=300,
                                                                   return_mode="median")
        res["ms_per_forward"]["eager"] = triton.testing.do_bench(lambda: model(ids), rep=300,
                                                                 return_mode="median")
    res["reference_max_abs"] = float(ref.abs().max())
    write(args.out, res)
    print(json.dumps({k: res[k] for k in ("gpu", "ms_per_forward", "max_abs_error", "compile_s",
                                          "errors")},
                     indent=1))


if __name__ == "__main__":
    main()
