"""W8A8 in one call: ``quantize_w8a8(model)`` swaps a model's ``nn.Linear`` layers for
int8 weights + per-token dynamic int8 activations, spelled with torch_npu's operators.

Each swapped layer (``W8A8Linear``) computes

    q, s = npu_dynamic_quant(x)                         # int8 per token, fp32 scale
    y = npu_quant_matmul(q, w_int8.t(), w_scale, pertoken_scale=s, output_dtype=x.dtype)
    y = y + bias                                        # when the layer has one

with the weight quantised symmetrically per output channel (``w_scale = amax / 127``,
round half to even, clamp to [-127, 127]). This is what a W8A8 checkpoint runs on an
Ascend device; compiled with op_sdk's backend, the residual add + RMSNorm the
``native_ops`` stage recognises then fuses with the quantisation
(``npu_add_rms_norm_dynamic_quant``), and with frozen parameters in max-autotune the int8
weights are prepacked. The activation is quantised in its own shape (no flatten before
the quantisation), so the norm's output feeds ``npu_dynamic_quant`` directly; layers that
read the same input quantise it once after the graph's common-subexpression elimination.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

__all__ = ["W8A8Linear", "W8A8GatedMLP", "quantize_w8a8", "use_internal_format_weight"]

# torch_npu's storage formats the weights are cast to (op_sdk.ops.format_cast.Format)
FRACTAL_Z, FRACTAL_NZ = 4, 29

DEQUANT_MODES = ("epilogue", "int32")


def _quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    w = weight.detach().float()
    amax = w.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


def _check_activation(module: str, x: torch.Tensor) -> None:
    if x.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"{module}: argument 'x' must be float16 or bfloat16 (the dtypes "
                        f"npu_quant_matmul writes), got {x.dtype}")


class W8A8Linear(nn.Module):
    """An ``nn.Linear`` as int8 weight (stored (out, in), read as its (in, out) view) with a
    float32 per-output-channel scale, and int8 per-token dynamic activations."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        q, scale = _quantize_weight(linear.weight)
        self.register_buffer("weight", q)
        self.register_buffer("weight_scale", scale)
        bias = linear.bias
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> W8A8Linear:
        return cls(linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        npu = torch.ops.npu
        _check_activation("W8A8Linear", x)
        lead = x.shape[:-1]
        q, s = npu.npu_dynamic_quant(x)
        y = npu.npu_quant_matmul(q.reshape(-1, self.in_features), self.weight.t(),
                                 self.weight_scale, pertoken_scale=s.reshape(-1),
                                 output_dtype=x.dtype)
        y = y.reshape(*lead, self.out_features)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")


def _is_gated_silu_mlp(module: nn.Module) -> bool:
    """A transformers gated MLP (Llama / Qwen2 / Qwen3 / Mistral ...): down_proj(act_fn(
    gate_proj(x)) * up_proj(x)) with SiLU and bias-free projections."""
    parts = [getattr(module, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
    act = getattr(module, "act_fn", None)
    if not (all(type(p) is nn.Linear and p.bias is None for p in parts) and callable(act)
            and parts[0].weight.shape == parts[1].weight.shape):
        return False
    # SiLU by what it computes (nn.SiLU, transformers' SiLUActivation, ...)
    probe = torch.linspace(-8.0, 8.0, 33)
    with torch.no_grad():
        out = act(probe)
    return isinstance(out, torch.Tensor) and torch.equal(out, torch.nn.functional.silu(probe))


class W8A8GatedMLP(nn.Module):
    """A gated SiLU MLP, W8A8, with gate and up as one int8 GEMM (their weights stacked, as
    vLLM's merged gate_up projection): per-token int8 x, the GEMM, SwiGLU of its two halves,
    per-token int8, the down GEMM. ``dequant``:

    * ``"epilogue"``: the gate / up GEMM applies the weight and token scales and writes x's
      dtype (``npu_quant_matmul(..., pertoken_scale=s, output_dtype=x.dtype)``), then
      ``npu_swiglu`` and ``npu_dynamic_quant``: what fusion 6 makes ``npu_swiglu_quant``;
    * ``"int32"``: the GEMM returns its int32 accumulator, dequantised in float32 (``acc *
      weight_scale * s``) before ``npu_swiglu`` and ``npu_dynamic_quant`` (vllm-ascend's W8A8
      MoE expert): what fusion 9 makes ``npu_dequant_swiglu_quant``."""

    def __init__(self, mlp: nn.Module, dequant: str = "epilogue"):
        super().__init__()
        if dequant not in DEQUANT_MODES:
            raise ValueError(f"W8A8GatedMLP: argument 'dequant' must be one of {DEQUANT_MODES}, "
                             f"got {dequant!r}")
        if not _is_gated_silu_mlp(mlp):
            raise TypeError("W8A8GatedMLP: argument 'mlp' must have bias-free nn.Linear "
                            "gate_proj / up_proj / down_proj of matching shapes and an nn.SiLU "
                            f"act_fn, got {type(mlp).__name__}")
        self.dequant = dequant
        gate_up = torch.cat((mlp.gate_proj.weight, mlp.up_proj.weight))  # gate first: npu_swiglu
        self.hidden, self.inter = mlp.gate_proj.in_features, mlp.gate_proj.out_features
        q, scale = _quantize_weight(gate_up)
        self.register_buffer("gate_up", q)
        self.register_buffer("gate_up_scale", scale)
        q, scale = _quantize_weight(mlp.down_proj.weight)
        self.register_buffer("down", q)
        self.register_buffer("down_scale", scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        npu = torch.ops.npu
        _check_activation("W8A8GatedMLP", x)
        lead = x.shape[:-1]
        q, s = npu.npu_dynamic_quant(x)
        q, s = q.reshape(-1, self.hidden), s.reshape(-1)
        if self.dequant == "int32":
            acc = npu.npu_quant_matmul(q, self.gate_up.t(), self.gate_up_scale,
                                       output_dtype=torch.int32)
            h = npu.npu_swiglu(acc.float() * self.gate_up_scale * s.unsqueeze(-1), -1)
        else:
            h = npu.npu_swiglu(npu.npu_quant_matmul(q, self.gate_up.t(), self.gate_up_scale,
                                                    pertoken_scale=s, output_dtype=x.dtype), -1)
        hq, hs = npu.npu_dynamic_quant(h)
        y = npu.npu_quant_matmul(hq, self.down.t(), self.down_scale, pertoken_scale=hs,
                                 output_dtype=x.dtype)
        return y.reshape(*lead, self.hidden)

    def extra_repr(self) -> str:
        return f"hidden={self.hidden}, intermediate={self.inter}, dequant={self.dequant!r}"


def quantize_w8a8(model: nn.Module, *, skip: Callable[[str, nn.Linear], bool] | tuple = (
        "lm_head",), gated_mlp: str | None = None) -> nn.Module:
    """Swap every ``nn.Linear`` of ``model`` (in place) for a ``W8A8Linear``, except those
    whose qualified name ends with one of ``skip`` (a tuple of names; default the output
    head, which W8A8 recipes keep in high precision) or for which ``skip(name, module)``
    is true. With ``gated_mlp`` ("epilogue" or "int32", ``W8A8GatedMLP``'s ``dequant``),
    every gated SiLU MLP (gate_proj / up_proj / down_proj, transformers' Llama / Qwen
    family) is first swapped whole for a ``W8A8GatedMLP`` (gate and up one GEMM).
    Returns ``model``; the number of layers swapped is ``model.w8a8_layers`` (a gated MLP
    counts its three projections)."""
    swapped = 0
    if gated_mlp is not None:
        if gated_mlp not in DEQUANT_MODES:
            raise ValueError(f"quantize_w8a8: argument 'gated_mlp' must be None or one of "
                             f"{DEQUANT_MODES}, got {gated_mlp!r}")
        for _parent_name, parent in list(model.named_modules()):
            for child_name, child in list(parent.named_children()):
                if _is_gated_silu_mlp(child):
                    setattr(parent, child_name, W8A8GatedMLP(child, gated_mlp))
                    swapped += 3
    if callable(skip):
        keep = skip
    else:
        names = tuple(skip)

        def keep(name, _module):
            return any(name == s or name.endswith("." + s) for s in names)

    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            if type(child) is nn.Linear and not keep(name, child):
                setattr(parent, child_name, W8A8Linear(child))
                swapped += 1
    model.w8a8_layers = swapped
    return model


def use_internal_format_weight(model: torch.nn.Module) -> None:
    """TorchAir's ``use_internal_format_weight(model)``: every ``nn.Linear`` weight (and
    op_sdk's W8A8 int8 weights) cast to FRACTAL_NZ (29), every float16 ``nn.Conv2d`` weight
    with one group to FRACTAL_Z (4), in place (``module.weight.data = npu_format_cast(...)``,
    as TorchAir does). On the NPU the cube unit reads those layouts faster; here the values
    stay and the format is recorded for the weight's storage, so code that reads it back
    (``get_npu_format``) sees what it sees on the NPU. TorchAir raises for CPU weights (its
    cast needs a device tensor); op_sdk's cast runs on any device."""
    cast = torch.ops.npu.npu_format_cast
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.weight.data = cast(module.weight.data, FRACTAL_NZ)
        elif (isinstance(module, torch.nn.Conv2d) and module.groups == 1
              and module.weight.dtype == torch.float16):
            module.weight.data = cast(module.weight.data, FRACTAL_Z)
        elif isinstance(module, W8A8Linear):
            module.weight = cast(module.weight, FRACTAL_NZ)
        elif isinstance(module, W8A8GatedMLP):
            module.gate_up = cast(module.gate_up, FRACTAL_NZ)
            module.down = cast(module.down, FRACTAL_NZ)
