"""ONNX in, ONNX out, measured: `op-sdk fuse` on torch.onnx exports of transformers models.

For each model (Llama, Qwen2: small configs, random weights, float32 since onnxruntime's
CPU kernels are float32) and sequence length: export with torch.onnx (dynamo), fuse with
``op_sdk.onnx.fuse_model`` (benefit model on this CPU), then time onnxruntime on the
exported and the fused model, interleaved, and compare their logits. Reported: groups
found / fused / refused, node counts, predicted time saved (sum of the fused groups'
predicted benefit) against measured, and the largest logit difference.

    python benchmarks/bench_onnx_fuse.py --seq 16 128 --out benchmarks/results/onnx_fuse.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import torch

from bench_autofusion import build, results_header  # same models, same results header

MODELS = ("llama", "qwen2")


def main(argv=None) -> int:
    import numpy as np
    import onnx
    import onnxruntime as ort

    from op_sdk.app.timing import time_interleaved
    from op_sdk.onnx import fuse_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--seq", type=int, nargs="+", default=[16, 128])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    results = results_header({"torch": torch.__version__, "onnx": onnx.__version__,
                              "onnxruntime": ort.__version__})
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = torch.get_num_threads()
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.models:
            model = build(kind, torch.float32)
            for seq in args.seq:
                ids = torch.randint(0, 4096, (1, seq), generator=torch.Generator().manual_seed(1))
                path = os.path.join(tmp, f"{kind}_{seq}.onnx")
                with torch.no_grad():
                    torch.onnx.export(model, (ids,), path, dynamo=True, input_names=["ids"],
                                      output_names=["logits"])
                    ref = model(ids).numpy()
                exported = onnx.load(path)
                fused, report = fuse_model(exported, device="cpu")
                fused_path = os.path.join(tmp, f"{kind}_{seq}_fused.onnx")
                onnx.save(fused, fused_path)
                sessions = {"exported": ort.InferenceSession(path, opts),
                            "fused": ort.InferenceSession(fused_path, opts)}
                feed = {sessions["exported"].get_inputs()[0].name: ids.numpy()}
                outs = {k: s.run(None, feed)[0] for k, s in sessions.items()}
                times = time_interleaved({k: (lambda s=s: s.run(None, feed))
                                          for k, s in sessions.items()}, args.repeats)
                summary = report.as_dict()
                predicted = sum(g.benefit_us or 0.0 for g in report.fused()) * 1e-3
                row = {"model": kind, "seq": seq, "opset": report.opset,
                       "ms": {k: v * 1e3 for k, v in times.items()},
                       "measured_saved_ms": (times["exported"] - times["fused"]) * 1e3,
                       "predicted_saved_ms": predicted,
                       "nodes": [summary.get("nodes_before"), summary.get("nodes_after")],
                       "found": {k: len(report.found(k)) for k in
                                 sorted({g.kind for g in report.found()})},
                       "fused": {k: len(report.fused(k)) for k in
                                 sorted({g.kind for g in report.fused()})},
                       "max_abs_diff_fused_vs_exported": float(
                           np.abs(outs["fused"] - outs["exported"]).max()),
                       "max_abs_diff_fused_vs_torch": float(np.abs(outs["fused"] - ref).max()),
                       "logits_max_abs": float(np.abs(ref).max())}
                results["rows"].append(row)
                print(f"{kind:6s} seq {seq:4d}: exported {row['ms']['exported']:8.2f} ms  "
                      f"fused {row['ms']['fused']:8.2f} ms  nodes {row['nodes']}  saved: "
                      f"measured {row['measured_saved_ms']:.3f} ms, predicted "
                      f"{row['predicted_saved_ms']:.3f} ms  fused {row['fused']}  "
                      f"max diff {row['max_abs_diff_fused_vs_exported']:.2e}", flush=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
