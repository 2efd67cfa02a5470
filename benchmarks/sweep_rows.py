"""The row kernel's launch geometry on a CUDA GPU: warps per program and the cap on
programs (a multiple of the SM count), for the norm / quantisation operators at T x H,
against the geometry ``_common.row_launch`` picks. Prints a table and writes ``<out>.json``.

    python benchmarks/sweep_rows.py [--out benchmarks/results/sweep_rows]
"""

from __future__ import annotations

import argparse
import os

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

    import op_sdk  # noqa: F401
    from op_sdk.app.triton_bench import record, sweep_inputs, timed, write
    from op_sdk.library import get_op
    from op_sdk.triton_kernels import _common, norm

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    picked = norm.row_launch
    rows = []
    for name in args.ops:
        opdef = get_op(name)
        for h in args.H:
            a, kw = sweep_inputs(opdef, args.T, h)
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
                    us = timed(lambda: opdef.op(*a, **kw), f"{name} {h} warps {warps} cap {cap}")
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
    write(args.out, record(
        "sweep_rows", sms=sms,
        timing="median CUDA-graph replay (do_bench_cudagraph, rep 30 ms), bfloat16",
        results=rows))


if __name__ == "__main__":
    main()
