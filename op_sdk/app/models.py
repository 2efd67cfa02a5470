"""The embedded default model: a DeepSeek-style decoder stack with W8A8 dynamic quantisation.

Written the way Ascend model code is written (torch.ops.npu calls, unfused), so that the
compiler's fusion passes find in it what they find in real DeepSeek deployments:

* attention input: residual add + RMSNorm, per-token dynamic quant with smooth scales
  (fusion: add_rms_norm + dynamic_quant -> npu_add_rms_norm_dynamic_quant);
* MLA-style absorbed projections: ``bmm`` of the per-head query with W_UK, and of the
  attention output with W_UV, each followed by ``transpose(0, 1)``
  (fusion: bmm + transpose -> npu_transpose_batchmatmul);
* MLP input: residual add + RMSNorm on (batch, seq, hidden), ``view`` to
  (tokens, hidden) = flatten(0, 1), dynamic quant without smooth scales and the scale
  viewed as (-1, 1) (fusion: the flatten / view variant), or, with
  ``mlp_quant="static"``, a static ``npu_quantize`` (fusion: add_rms_norm_quant);
* the final norm viewed as (-1, hidden) and cast to float32 for the head
  (fusion: add_rms_norm + cast -> npu_add_rms_norm_cast).

Projections are int8 x int8 ``npu_quant_matmul`` with per-channel weight scales and
per-token activation scales. Weights are random (seeded): the model is for measuring
compilers and kernels, not for generating text.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import nn

import op_sdk  # noqa: F401  (registers torch.ops.npu)

npu = torch.ops.npu


@dataclasses.dataclass
class DecoderConfig:
    """Sizes of the embedded model. ``validate`` states every rule."""

    layers: int = 4
    hidden: int = 1024
    heads: int = 8
    head_dim: int = 128  # the no-rope query / value head size
    kv_lora: int = 256  # MLA's compressed KV rank
    intermediate: int = 2816
    vocab: int = 4096
    dtype: str = "bfloat16"  # or "float16"
    mlp_quant: str = "dynamic"  # or "static"
    # >= 0: also return that layer's normalised attention input, as speculative-decoding
    # drafts tap hidden states; the tap is a second user of an intermediate, so the
    # add_rms_norm + dynamic_quant fusion must not fire there
    aux_layer: int = -1
    seed: int = 0

    def validate(self) -> None:
        def need(cond, field, rule):
            if not cond:
                raise ValueError(f"model option '{field}' {rule}")

        for field in ("layers", "hidden", "heads", "head_dim", "kv_lora", "intermediate", "vocab"):
            need(getattr(self, field) >= 1, field, f"must be >= 1, got {getattr(self, field)}")
        need(self.dtype in ("bfloat16", "float16"), "dtype",
             f"must be bfloat16 or float16, got {self.dtype!r}")
        need(-1 <= self.aux_layer < self.layers, "aux_layer",
             f"must be -1 (none) or a layer index below {self.layers}, got {self.aux_layer}")
        need(self.mlp_quant in ("dynamic", "static"), "mlp_quant",
             f"must be dynamic or static, got {self.mlp_quant!r}")
        # npu_dynamic_quant's int8 path has no alignment rule, but the fused
        # npu_add_rms_norm_quant needs 32-byte rows and the MLA bmm fusion 128-aligned dims:
        need(self.hidden % 16 == 0, "hidden",
             f"must be a multiple of 16 (32-byte rows of 16-bit values), got {self.hidden}")
        need(self.head_dim % 128 == 0, "head_dim",
             f"must be a multiple of 128 (the bmm fusion's alignment), got {self.head_dim}")
        need(self.kv_lora % 128 == 0, "kv_lora",
             f"must be a multiple of 128 (the bmm fusion's alignment), got {self.kv_lora}")

    @property
    def torch_dtype(self) -> torch.dtype:
        return getattr(torch, self.dtype)


def _int8_weight(gen, k, n):
    """An int8 (k, n) weight stored as its transpose: (n, k) rows are what the int8 GEMM
    reads fastest (1.8x faster than a (k, n) row-major weight on this CPU's oneDNN path);
    forward passes ``w.t()``, the (k, n) view npu_quant_matmul takes."""
    w = torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=gen)
    # per-output-channel scale so that the projection keeps unit variance
    scale = torch.full((n,), 1.0 / (127.0 * math.sqrt(k) * 0.58), dtype=torch.float32)
    return w, scale


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig, gen: torch.Generator):
        super().__init__()
        h, nh, d, c = cfg.hidden, cfg.heads, cfg.head_dim, cfg.kv_lora
        dt = cfg.torch_dtype
        self.cfg = cfg

        def param(*shape, scale=1.0, offset=0.0):
            t = torch.randn(*shape, generator=gen) * scale + offset
            return nn.Parameter(t.to(dt), requires_grad=False)

        def buf(name, t):
            self.register_buffer(name, t, persistent=False)

        self.attn_norm = param(h, scale=0.1, offset=1.0)
        self.attn_smooth = param(h, scale=0.1, offset=1.0)
        self.mlp_norm = param(h, scale=0.1, offset=1.0)
        # fused q / kv-latent projection: [q_nope (nh*d) | c_kv (c)]
        w, s = _int8_weight(gen, h, nh * d + c)
        buf("w_qkv", w)
        buf("s_qkv", s)
        self.kv_norm = param(c, scale=0.1, offset=1.0)
        self.w_uk = param(nh, d, c, scale=1.0 / math.sqrt(d))  # absorbed into the query
        self.w_uv = param(nh, c, d, scale=1.0 / math.sqrt(c))
        w, s = _int8_weight(gen, nh * d, h)
        buf("w_o", w)
        buf("s_o", s)
        w, s = _int8_weight(gen, h, 2 * cfg.intermediate)
        buf("w_gate_up", w)
        buf("s_gate_up", s)
        w, s = _int8_weight(gen, cfg.intermediate, h)
        buf("w_down", w)
        buf("s_down", s)
        if cfg.mlp_quant == "static":
            act_scale = torch.full((h,), 4.0 / 127.0)
            if dt == torch.float16:
                buf("mlp_in_scale", act_scale)
                buf("mlp_in_zp", torch.zeros(h, dtype=torch.int32))
            else:
                buf("mlp_in_scale", act_scale.to(dt))
                buf("mlp_in_zp", torch.zeros(h, dtype=dt))

    def forward(self, hidden: torch.Tensor, residual: torch.Tensor, taps: list | None = None):
        cfg = self.cfg
        b, s, h = hidden.shape
        nh, d, c = cfg.heads, cfg.head_dim, cfg.kv_lora
        dt = hidden.dtype

        # --- attention: add + norm + smooth dynamic quant -> fused q / latent projection
        y, _, residual = npu.npu_add_rms_norm(residual, hidden, self.attn_norm)
        if taps is not None:
            taps.append(y)
        q8, qs = npu.npu_dynamic_quant(y, smooth_scales=self.attn_smooth)
        t = b * s
        qkv = npu.npu_quant_matmul(q8.view(t, h), self.w_qkv.t(), self.s_qkv,
                                   pertoken_scale=qs.view(t), output_dtype=dt)
        q_nope = qkv[:, : nh * d].reshape(t, nh, d)
        c_kv, _ = npu.npu_rms_norm(qkv[:, nh * d:].contiguous(), self.kv_norm)
        # MLA absorption: (nh, t, d) @ (nh, d, c) -> (nh, t, c) -> (t, nh, c)
        q_lat = torch.bmm(q_nope.transpose(0, 1), self.w_uk).transpose(0, 1)
        q_lat = q_lat.reshape(b, s, nh, c)
        kv = c_kv.view(b, s, c)
        scores = torch.einsum("bqhc,bkc->bhqk", q_lat.float(), kv.float()) / math.sqrt(d + c)
        causal = torch.ones(s, s, dtype=torch.bool, device=hidden.device).tril()
        probs = scores.masked_fill(~causal, float("-inf")).softmax(-1)
        o_lat = torch.einsum("bhqk,bkc->bqhc", probs, kv.float()).to(dt)
        # (nh, t, c) @ (nh, c, d) -> (nh, t, d) -> (t, nh, d)
        o = torch.bmm(o_lat.reshape(t, nh, c).transpose(0, 1), self.w_uv).transpose(0, 1)
        o8, os_ = npu.npu_dynamic_quant(o.reshape(t, nh * d))
        attn = npu.npu_quant_matmul(o8, self.w_o.t(), self.s_o, pertoken_scale=os_,
                                    output_dtype=dt).view(b, s, h)

        # --- MLP: add + norm on (b, s, h), flatten(0, 1), quant, SwiGLU, down projection
        y, _, residual = npu.npu_add_rms_norm(residual, attn, self.mlp_norm)
        if cfg.mlp_quant == "dynamic":
            m8, ms = npu.npu_dynamic_quant(y.view(-1, h))
            act_scale = ms.view(-1, 1)
        else:
            m8 = npu.npu_quantize(y, self.mlp_in_scale, self.mlp_in_zp, torch.qint8, -1, True)
            m8, act_scale = m8.view(-1, h), self.mlp_in_scale.float()[:1].view(1, 1)
        # int32 accumulator, dequantised by hand (Inductor fuses this with the SwiGLU)
        acc = npu.npu_quant_matmul(m8, self.w_gate_up.t(), self.s_gate_up, output_dtype=torch.int32)
        gate_up = acc.float() * act_scale * self.s_gate_up
        gate, up = gate_up.chunk(2, dim=-1)
        act = (torch.nn.functional.silu(gate) * up).to(dt)
        a8, as_ = npu.npu_dynamic_quant(act)
        down = npu.npu_quant_matmul(a8, self.w_down.t(), self.s_down, pertoken_scale=as_,
                                    output_dtype=dt)
        return down.view(b, s, h), residual


class DeepSeekW8A8(nn.Module):
    """Embedding -> ``layers`` decoder layers -> final add + norm -> fp32 head."""

    def __init__(self, cfg: DecoderConfig | None = None):
        super().__init__()
        cfg = cfg or DecoderConfig()
        cfg.validate()
        self.cfg = cfg
        gen = torch.Generator().manual_seed(cfg.seed)
        self.embed = nn.Parameter((torch.randn(cfg.vocab, cfg.hidden, generator=gen))
                                  .to(cfg.torch_dtype), requires_grad=False)
        self.layers = nn.ModuleList(DecoderLayer(cfg, gen) for _ in range(cfg.layers))
        self.final_norm = nn.Parameter((torch.randn(cfg.hidden, generator=gen) * 0.1 + 1)
                                       .to(cfg.torch_dtype), requires_grad=False)
        self.head = nn.Parameter(torch.randn(cfg.hidden, cfg.vocab, generator=gen)
                                 / math.sqrt(cfg.hidden), requires_grad=False)

    def forward(self, tokens: torch.Tensor):
        """tokens: (batch, seq) int64 -> logits (batch * seq, vocab) float32; with
        ``aux_layer`` set, (logits, that layer's normalised hidden state)."""
        hidden = self.embed[tokens]
        residual = torch.zeros_like(hidden)
        taps: list = []
        for i, layer in enumerate(self.layers):
            hidden, residual = layer(hidden, residual, taps if i == self.cfg.aux_layer else None)
        y, _, _ = npu.npu_add_rms_norm(residual, hidden, self.final_norm)
        h = y.size(-1)
        logits = y.view(-1, h).to(torch.float32) @ self.head
        return (logits, taps[0]) if taps else logits

    def example_tokens(self, batch: int, seq: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(self.cfg.seed + 1)
        return torch.randint(0, self.cfg.vocab, (batch, seq), generator=gen)
