"""The row kernel's launch geometry on a CUDA GPU: warps per program and the cap on
programs (a multiple of the SM count), for the norm / quantisation operators at T x H,
against the geometry ``_common.row_launch`` picks. Prints a table and writes ``<out>.json``.

    python benchmarks/sweep_rows.py [--out benchmarks/results/sweep_rows]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys

import torch


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--T", type=int, default=4096)
    p.add_argument("--H", type=int, nargs="+", default=[4096, 7168])
    p.add_argument("--ops", nargs="+", default=["npu_add_rms_norm_quant", "npu_dynamic_quant",
                                                "npu_add_rms_norm_dynamic_quant", "npu_rms_norm"])
    p.add_argument("--warps", type=int, nargs="+", default=[4, 8, 16, 32])
    p.add_argument("--caps", type=int, nargs="+", default=[4, 8, 16])
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "sweep_rows"))
    args = p.parse_args(argv)
    import triton
    import triton.testing

    import op_sdk  # noqa: F401
    from op_sdk.library import get_op
    from op_sdk.triton_kernels import _common, norm

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    picked = norm.row_launch
    rows = []
    for name in args.ops:
        opdef = get_op(name)
        for h in args.H:
            torch.manual_seed(0)
            a, kw = opdef.benchmarks[0].make(args.T, h, torch.bfloat16)
            a = tuple(x.cuda() if isinstance(x, torch.Tensor) else x for x in a)
            kw = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in kw.items()}
            configs = [(None, None)] + [(w, c) for w in args.warps for c in args.caps]
            for warps, cap in configs:
                if warps is None:
                    norm.row_launch = picked
                else:
                    def geometry(n_rows, block, elem_bytes, device, quant=False, w=warps, c=cap):
                        programs = min(n_rows, c * sms)
                        return {"grid": (programs,), "num_warps": w, "programs": programs}
                    norm.row_launch = geometry
                try:
                    opdef.op(*a, **kw)
                    us = 1e3 * triton.testing.do_bench_cudagraph(lambda: opdef.op(*a, **kw),
                                                                 rep=30, return_mode="median")
                except Exception as exc:  # e.g. too many registers for the warps
                    us = None
                    print(f"  {name} {h} warps {warps} cap {cap}: {type(exc).__name__}")
                finally:
                    norm.row_launch = picked
                row = {"op": name, "T": args.T, "H": h, "warps": warps, "cap_per_sm": cap,
                       "us": us}
                if warps is None:
                    cfg = picked(args.T, _common.block_for(h), 2, torch.device("cuda"),
                                 quant="quant" in name)
                    row.update(warps_picked=cfg["num_warps"], programs_picked=cfg["programs"])
                rows.append(row)
                print(f"{name:<31} {h:>5} warps {str(warps or 'picked'):>6} cap {str(cap or ''):>3} "
                      f"{'-' if us is None else f'{us:8.1f} us'}", flush=True)
    res = {"benchmark": "sweep_rows", "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
           "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
           "gpu": torch.cuda.get_device_name(), "sms": sms,
           "versions": {"torch": torch.__version__, "triton": triton.__version__},
           "timing": "median CUDA-graph replay (do_bench_cudagraph, rep 30 ms), bfloat16",
           "results": rows}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
