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

__all__ = ["W8A8Linear", "quantize_w8a8"]


def _quantize_weight(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    w = weight.detach().float()
    amax = w.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / 127.0, torch.ones_like(amax))
    q = torch.round(w / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return q, scale


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
        if x.dtype not in (torch.float16, torch.bfloat16):
            raise TypeError(f"W8A8Linear: argument 'x' must be float16 or bfloat16 (the "
                            f"dtypes npu_quant_matmul writes), got {x.dtype}")
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


def quantize_w8a8(model: nn.Module, *, skip: Callable[[str, nn.Linear], bool] | tuple = (
        "lm_head",)) -> nn.Module:
    """Swap every ``nn.Linear`` of ``model`` (in place) for a ``W8A8Linear``, except those
    whose qualified name ends with one of ``skip`` (a tuple of names; default the output
    head, which W8A8 recipes keep in high precision) or for which ``skip(name, module)``
    is true. Returns ``model``; the number of layers swapped is ``model.w8a8_layers``."""
    if callable(skip):
        keep = skip
    else:
        names = tuple(skip)

        def keep(name, _module):
            return any(name == s or name.endswith("." + s) for s in names)

    swapped = 0
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            if type(child) is nn.Linear and not keep(name, child):
                setattr(parent, child_name, W8A8Linear(child))
                swapped += 1
    model.w8a8_layers = swapped
    return model
