"""Automatic fusion, measured: unmodified model code compiled with op_sdk's backend.

For each model (the embedded DeepSeek-style W8A8 demo model, and transformers' Llama,
Qwen2, DeepSeek-V3, Qwen3, and a W8A8 Llama and Phi-3 built with ``op_sdk.quantize_w8a8``,
the Llama also with its gate / up merged, ``gated_mlp`` "epilogue" and "int32":
small configs, random weights, bfloat16) and each token count, in one process:

* the fusions found and applied (``op_sdk.explain``: native_ops rules and default fusions),
  the candidates refused and why, and the benefit model's predicted time saved;
* the time per forward of eager, torch.compile's default backend (Inductor), op_sdk's
  backend as the demo configures it ("op_sdk": the benefit model on this CPU decides),
  the same applying every match that passes its checks ("op_sdk_all": threshold None),
  and with ``experimental_config.native_ops`` and the fusions off ("op_sdk_no_fusion"):
  the measured time the applied fusions save (op_sdk_no_fusion - op_sdk) next to the
  predicted one, and what the refused ones would have saved (op_sdk - op_sdk_all).

    python benchmarks/bench_autofusion.py --tokens 1 16 --out benchmarks/results/autofusion.json

Timings interleave the contenders (op_sdk.app.timing.time_interleaved); the machine, the
versions, the load average and the command go into the results file.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch
from torch import nn

CONTENDERS = ("eager", "inductor", "op_sdk", "op_sdk_all", "op_sdk_no_fusion")
MODELS = ("demo", "llama", "qwen2", "deepseek_v3", "llama_w8a8", "qwen3", "phi3_w8a8",
          "llama_w8a8_gated", "llama_w8a8_int32")
# quantize_w8a8(gated_mlp=...) per model: gate and up one GEMM, dequantised in its epilogue
# (SwiGLU + int8: fusion 6) or after its int32 accumulator (fusion 9)
GATED = {"llama_w8a8_gated": "epilogue", "llama_w8a8_int32": "int32"}


class Logits(nn.Module):
    """A transformers causal LM as ids -> logits (no cache)."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(ids, use_cache=False).logits


def build(kind: str, dtype: torch.dtype = torch.bfloat16) -> nn.Module:
    """``kind`` with random weights (seed 0) in ``dtype`` (W8A8: its int8 layers aside)."""
    torch.manual_seed(0)
    if kind == "demo":
        from op_sdk.app.models import DecoderConfig, DeepSeekW8A8

        return DeepSeekW8A8(DecoderConfig()).eval()
    import transformers

    common = dict(vocab_size=4096, hidden_size=1024, intermediate_size=2816,
                  num_hidden_layers=4, num_attention_heads=16, num_key_value_heads=8,
                  max_position_embeddings=512)
    if kind in ("llama", "llama_w8a8", *GATED):
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    elif kind == "qwen2":
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**common))
    elif kind == "qwen3":  # q_norm / k_norm over each head's 64 dims, then RoPE
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**common, head_dim=64))
    elif kind == "phi3_w8a8":  # gate and up in one projection: SwiGLU + int8 fuse
        model = transformers.Phi3ForCausalLM(transformers.Phi3Config(
            **common, pad_token_id=0, bos_token_id=1, eos_token_id=2))
    elif kind == "deepseek_v3":
        cfg = transformers.DeepseekV3Config(
            **{**common, "num_key_value_heads": 16}, moe_intermediate_size=512,
            first_k_dense_replace=1, n_routed_experts=8, num_experts_per_tok=2,
            n_shared_experts=1, n_group=1, topk_group=1, q_lora_rank=384, kv_lora_rank=256,
            qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64)
        model = transformers.DeepseekV3ForCausalLM(cfg)
    else:
        raise ValueError(kind)
    model = model.eval().to(dtype)
    if kind in ("llama_w8a8", "phi3_w8a8", *GATED):
        import op_sdk

        op_sdk.quantize_w8a8(model, gated_mlp=GATED.get(kind))
    return Logits(model)


def ids_for(kind: str, model: nn.Module, tokens: int) -> torch.Tensor:
    if kind == "demo":
        return model.example_tokens(1, tokens)
    return torch.randint(0, 4096, (1, tokens), generator=torch.Generator().manual_seed(1))


def op_sdk_config(name: str):
    from op_sdk.app.demo import demo_config

    cfg = demo_config()
    if name == "op_sdk_all":
        cfg.experimental_config.fusion_benefit_threshold_us = None
    if name == "op_sdk_no_fusion":
        cfg.experimental_config.native_ops = False
        cfg.experimental_config.pattern_fusion_pass = False
    return cfg


def compile_contender(model, ids, name):
    import torch._inductor.config as inductor_config

    import op_sdk
    from op_sdk.app.demo import logits_of

    backend = None
    if name == "eager":
        fn = model
    elif name == "inductor":
        fn = torch.compile(model, backend="inductor", dynamic=False)
    else:
        backend = op_sdk.get_npu_backend(compiler_config=op_sdk_config(name))
        fn = torch.compile(model, backend=backend, dynamic=False)
    start = time.perf_counter()
    with inductor_config.patch(fx_graph_cache=False), torch.no_grad():
        out = logits_of(fn(ids))
    return fn, out, time.perf_counter() - start, backend


def fusion_record(backend) -> dict:
    import op_sdk

    exp = op_sdk.explain(backend)
    predicted = 0.0
    refused_benefit = sum(1 for m in exp.near_misses if m.kind == "benefit")
    per_fusion = {}
    for row in exp.table():
        predicted += row["benefit_us"] * 1e-6
        per_fusion[row["pattern"]] = {k: v for k, v in row.items() if k != "pattern"}
    refused: dict[str, int] = {}
    for miss in exp.near_misses:
        key = f"{miss.fusion}: {miss.kind}"
        refused[key] = refused.get(key, 0) + 1
    return {"applied": exp.patterns, "fusions": per_fusion, "refused": refused,
            "refused_by_benefit": refused_benefit, "predicted_saved_s": predicted}


def results_header(versions: dict) -> dict:
    """What every results file starts with: command, machine, load average, versions."""
    from op_sdk.app.machine import machine_facts

    return {"command": " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]),
            "machine": machine_facts(), "load_average": os.getloadavg(),
            "versions": versions, "rows": []}


def main(argv=None) -> int:
    from op_sdk.app.timing import time_interleaved

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 16])
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    results = results_header(_versions())
    for kind in args.models:
        model = build(kind)
        for tokens in args.tokens:
            torch._dynamo.reset()
            ids = ids_for(kind, model, tokens)
            fns, outs, compile_s, record = {}, {}, {}, None
            for name in CONTENDERS:
                fn, out, seconds, backend = compile_contender(model, ids, name)
                fns[name] = (lambda f=fn: f(ids))
                outs[name], compile_s[name] = out, seconds
                if name == "op_sdk":
                    record = fusion_record(backend)
            with torch.no_grad():
                times = time_interleaved(fns, args.repeats)
            ref = outs["eager"].float()
            scale = ref.abs().max().item() or 1.0
            row = {"model": kind, "tokens": tokens,
                   "ms": {k: v * 1e3 for k, v in times.items()},
                   "compile_s": compile_s,
                   "max_rel_error_vs_eager": {k: (outs[k].float() - ref).abs().max().item() / scale
                                              for k in CONTENDERS if k != "eager"},
                   "speedup_vs_inductor": times["inductor"] / times["op_sdk"],
                   "measured_saved_ms": (times["op_sdk_no_fusion"] - times["op_sdk"]) * 1e3,
                   "refused_would_save_ms": (times["op_sdk"] - times["op_sdk_all"]) * 1e3,
                   "predicted_saved_ms": record["predicted_saved_s"] * 1e3,
                   **{k: v for k, v in record.items() if k != "predicted_saved_s"}}
            results["rows"].append(row)
            print(f"{kind:12s} tokens {tokens:4d}: " + "  ".join(
                f"{k} {v * 1e3:8.2f} ms" for k, v in times.items())
                + f"  | op_sdk/inductor {row['speedup_vs_inductor']:.2f}x"
                + f"  saved: measured {row['measured_saved_ms']:.3f} ms, predicted "
                  f"{row['predicted_saved_ms']:.3f} ms; refused {record['refused_by_benefit']}"
                  f" (would save {row['refused_would_save_ms']:.3f} ms)  applied "
                  f"{record['applied']}",
                flush=True)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1, default=str)
    return 0


def _versions() -> dict:
    out = {"torch": torch.__version__}
    for mod in ("transformers", "op_sdk"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as exc:  # noqa: BLE001 - recorded, never fatal
            out[mod] = f"unavailable ({exc})"
    return out


if __name__ == "__main__":
    sys.exit(main())
