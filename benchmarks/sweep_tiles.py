"""The tiled kernels' tile on a CUDA GPU: elements per program (``_common.TILE``;
npu_rotary_mul's ``rotary.TILE``, in pairs) and warps (``_common.TILE_WARPS``) for
npu_rotary_mul, npu_quantize and npu_swiglu at T x H, against the tile the launchers use.
Prints a table and writes ``<out>.json``.

    python benchmarks/sweep_tiles.py [--out benchmarks/results/sweep_tiles]
"""

from __future__ import annotations

import argparse
import os


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--T", type=int, default=4096)
    p.add_argument("--H", type=int, nargs="+", default=[4096])
    p.add_argument("--ops", nargs="+", default=["npu_rotary_mul", "npu_quantize", "npu_swiglu"])
    p.add_argument("--tiles", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    p.add_argument("--warps", type=int, nargs="+", default=[4, 8])
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "sweep_tiles"))
    args = p.parse_args(argv)

    import op_sdk  # noqa: F401
    from op_sdk.library import get_op
    from op_sdk.app.triton_bench import record, sweep_inputs, timed, write
    from op_sdk.triton_kernels import _common, rotary

    rows = []
    for name in args.ops:
        # npu_rotary_mul's tile (pairs) is its module's; the others take _common's
        mod = rotary if name == "npu_rotary_mul" else _common
        picked = (mod.TILE, _common.TILE_WARPS)
        opdef = get_op(name)
        for h in args.H:
            a, kw = sweep_inputs(opdef, args.T, h)
            for tile, warps in [picked] + [(t, w) for t in args.tiles for w in args.warps]:
                mod.TILE, _common.TILE_WARPS = tile, warps
                try:
                    us = timed(lambda: opdef.op(*a, **kw), f"{name} {h} tile {tile} warps {warps}")
                finally:
                    mod.TILE, _common.TILE_WARPS = picked
                rows.append({"op": name, "T": args.T, "H": h, "tile": tile, "warps": warps,
                             "picked": (tile, warps) == picked, "us": us})
                print(f"{name:<18} {h:>5} tile {tile:>5} warps {warps:>2} "
                      f"{'-' if us is None else f'{us:8.1f} us'}", flush=True)
    write(args.out, record(
        "sweep_tiles", timing="median CUDA-graph replay (do_bench_cudagraph, rep 30 ms), bfloat16",
        results=rows))


if __name__ == "__main__":
    main()
