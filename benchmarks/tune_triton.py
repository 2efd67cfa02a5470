"""Launch-geometry sweep of the Triton kernels on a CUDA GPU (what sets the defaults in
op_sdk/triton_kernels): the row kernel's programs per SM and warps, SwiGLU's block and warps,
at T x H = 4096 x {4096, 7168} bf16, each timed as a CUDA-graph replay (median), beside
torch.compile of the reference in the same run. Writes ``<out>.json``.

    python benchmarks/tune_triton.py [--out benchmarks/results/tune_triton_h100]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

import torch


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "tune_triton"))
    p.add_argument("--rep", type=int, default=50)
    args = p.parse_args(argv)
    import triton
    import triton.testing

    import op_sdk  # noqa: F401
    from op_sdk.library import get_op
    from op_sdk.triton_kernels import _common, norm, swiglu

    bench = functools.partial(triton.testing.do_bench_cudagraph, rep=args.rep, return_mode="median")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows_ops = ["npu_add_rms_norm_quant", "npu_dynamic_quant", "npu_add_rms_norm_dynamic_quant",
                "npu_rms_norm"]
    results = []
    original = _common.row_launch

    def geometry(per_sm, elems_per_thread, cap):
        def launch(rows, block, elem_bytes, device):
            programs = max(1, min(rows, sms * per_sm))
            warps = max(1, min(cap, block // (32 * elems_per_thread)))
            return {"grid": (programs,), "num_warps": warps, "programs": programs}
        return launch

    variants = [("default", original)] + [
        (f"per_sm={ps} ept={ept} cap={cap}", geometry(ps, ept, cap))
        for ps in (2, 4, 8) for ept, cap in ((8, 32), (16, 16), (4, 32))]
    for name in rows_ops + ["npu_swiglu"]:
        opdef = get_op(name)
        spec = opdef.benchmarks[0]
        compiled = torch.compile(spec.composite or opdef.reference, dynamic=False)
        for h in (4096, 7168):
            torch.manual_seed(0)
            a, kw = spec.make(4096, h, torch.bfloat16)
            a = tuple(x.cuda() if isinstance(x, torch.Tensor) else x for x in a)
            kw = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
            with torch.inference_mode():
                compiled(*a, **kw)
                row = {"op": name, "T": 4096, "H": h,
                       "compiled_us": 1e3 * bench(lambda: compiled(*a, **kw)), "variants": {}}
                if name == "npu_swiglu":
                    for block in (1024, 2048, 4096):
                        for warps in (4, 8, 16):
                            swiglu._BLOCK, swiglu._WARPS = block, warps
                            opdef.op(*a, **kw)
                            row["variants"][f"block={block} warps={warps}"] = \
                                1e3 * bench(lambda: opdef.op(*a, **kw))
                    swiglu._BLOCK, swiglu._WARPS = 1024, 4
                else:
                    for vname, fn in variants:
                        norm.row_launch = fn
                        opdef.op(*a, **kw)
                        row["variants"][vname] = 1e3 * bench(lambda: opdef.op(*a, **kw))
                    norm.row_launch = original
            best = min(row["variants"], key=row["variants"].get)
            print(f"{name:<31} {h:>5} compiled {row['compiled_us']:7.1f} us  default "
                  f"{row['variants'].get('default', row['variants'].get('block=1024 warps=4')):7.1f}"
                  f"  best {row['variants'][best]:7.1f} ({best})", flush=True)
            results.append(row)
        torch._dynamo.reset()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump({"command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                   "gpu": torch.cuda.get_device_name(), "sms": sms,
                   "versions": {"torch": torch.__version__, "triton": triton.__version__},
                   "timing": f"median CUDA-graph replay, rep={args.rep} ms",
                   "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
