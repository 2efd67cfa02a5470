"""npu_quant_matmul's int8 form on a CUDA GPU: its Triton kernel (the tiles
``quant_matmul.tiles`` picks, and the alternatives of a small sweep), torch._int_mm alone
(cuBLAS's int32 product only: a floor for any cuBLAS-based path), the composite in eager
mode and under torch.compile (default Inductor: _int_mm + its generated epilogue), and the
operator's reference under torch.compile (fp64 product: what the operator cost on CUDA
before its kernel). Per-token W8A8 calls, bfloat16 output, the weight stored (n, k) as a
model keeps it; the compiled composite is checked bit for bit against the kernel. Prints a
table and writes ``<out>.json``.

    python benchmarks/sweep_quant_matmul.py [--out benchmarks/results/sweep_quant_matmul]
"""

from __future__ import annotations

import argparse
import os

CONFIGS = [  # (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
    (16, 64, 256, 4, 4), (16, 128, 128, 4, 4), (32, 64, 256, 4, 4), (64, 64, 128, 4, 4),
    (64, 128, 128, 4, 4), (128, 128, 128, 8, 3), (128, 256, 128, 8, 3), (128, 128, 64, 4, 4),
]


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--M", type=int, nargs="+", default=[1, 16, 64, 256, 1024, 4096])
    p.add_argument("--KN", nargs="+", default=["4096x4096", "7168x2048", "2048x7168"],
                   help="k x n of the weight")
    p.add_argument("--rep", type=int, default=30)
    p.add_argument("--out", default=os.path.join("benchmarks", "results", "sweep_quant_matmul"))
    args = p.parse_args(argv)

    import torch

    import op_sdk  # noqa: F401
    from op_sdk.app.triton_bench import record, timed, write
    from op_sdk.library import get_op
    from op_sdk.ops.quant_matmul import bench_composite
    from op_sdk.triton_kernels import quant_matmul as qmm

    op = torch.ops.npu.npu_quant_matmul
    reference = get_op("npu_quant_matmul").reference
    compiled = torch.compile(bench_composite, dynamic=False)
    compiled_ref = torch.compile(reference, dynamic=False)
    torch._dynamo.config.cache_size_limit = 1024
    rows = []
    for kn in args.KN:
        k, n = (int(v) for v in kn.split("x"))
        for m in args.M:
            torch.manual_seed(0)
            x1 = torch.randint(-127, 128, (m, k), dtype=torch.int8, device="cuda")
            w = torch.randint(-127, 128, (n, k), dtype=torch.int8, device="cuda").t()
            s = torch.rand(n, device="cuda") * 1e-3
            kw = {"pertoken_scale": torch.rand(m, device="cuda") + 0.5,
                  "output_dtype": torch.bfloat16}
            picked = qmm.tiles(m, k, n, x1.device)
            us, exact = {}, True
            with torch.inference_mode():
                base = op(x1, w, s, **kw)
                us["picked"] = timed(lambda: op(x1, w, s, **kw), "picked", args.rep)
                sweep = {}
                for bm, bn, bk, wp, st in CONFIGS:
                    cfg = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "num_warps": wp,
                           "num_stages": st}
                    real = qmm.run
                    qmm.run = lambda *a, _c=cfg, **k: real(*a, config=_c, **k)
                    try:
                        sweep[f"{bm}x{bn}x{bk}/w{wp}/s{st}"] = timed(
                            lambda: op(x1, w, s, **kw), f"{m} {kn} {cfg}", args.rep)
                    finally:
                        qmm.run = real
                if m > 16:  # torch._int_mm's least row count on CUDA
                    us["int_mm_only"] = timed(lambda: torch._int_mm(x1, w), "int_mm only", args.rep)
                    us["eager_composite"] = timed(lambda: bench_composite(x1, w, s, **kw), "eager", args.rep)
                    us["compiled_composite"] = timed(lambda: compiled(x1, w, s, **kw), "compiled", args.rep)
                    exact = torch.equal(compiled(x1, w, s, **kw), base)
                us["compiled_reference"] = timed(lambda: compiled_ref(x1, w, s, **kw), "compiled ref", args.rep)
            best = min((v, c) for c, v in sweep.items() if v is not None)
            row = {"M": m, "K": k, "N": n, "picked_tiles": picked, **{f"{c}_us": v for c, v in us.items()},
                   "sweep_us": sweep, "best_sweep": best[1], "best_sweep_us": best[0],
                   "TOPS_picked": 2 * m * n * k / us["picked"] / 1e6 if us["picked"] else None,
                   "compiled_composite_bit_exact": exact}
            rows.append(row)
            cols = "  ".join(f"{c} {v:8.1f}" for c, v in us.items() if v is not None)
            print(f"M {m:>5} {kn:>10}  {cols}  best {best[1]} {best[0]:.1f} us  exact {exact}",
                  flush=True)
    write(args.out, record(
        "sweep_quant_matmul",
        timing=f"median CUDA-graph replay (do_bench_cudagraph, rep {args.rep} ms)",
        call="npu_quant_matmul(x1 int8 (M, K), w int8 (N, K) transposed, scale (N,), "
             "pertoken_scale (M,), output_dtype bfloat16)",
        results=rows))


if __name__ == "__main__":
    main()
