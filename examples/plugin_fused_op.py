"""A user's fused operator in one Python file, plugin style: no rebuild, no C++.

Load this file before compiling (``import plugin_fused_op`` or ``python plugin_fused_op.py``)
and ``torch.ops.my_ops.silu_mul_quant`` works in eager and under torch.compile: a CPU
kernel of its own, the reference on any other device.

The operator: SwiGLU's ``silu(gate) * up`` followed by per-token dynamic int8
quantisation, i.e. what feeds a W8A8 down-projection.

Its fusion needs no pattern code: the declaration carries the operator's unfused spelling
(``composite=``: ``npu_dynamic_quant(silu(gate) * up)``), and
``op_sdk.register_fusion(silu_mul_quant)`` registers the fusion derived from it into the
current pattern registry, so that a model compiled with ``op_sdk.get_npu_backend()``
(``reduce-overhead`` or ``max-autotune``, where Inductor has decomposed the silu) gets
``torch.ops.my_ops.silu_mul_quant`` in place of the three unfused operators. Nothing is
traced at import: the patterns are traced at the first compile (docs/fusions.md).
"""

from __future__ import annotations

import torch

import op_sdk
from op_sdk.converters import GeIr

SCHEMA = "silu_mul_quant(Tensor gate, Tensor up) -> (Tensor, Tensor)"


def check(gate, up):
    """The operator's rules, shared by every implementation below."""
    if gate.shape != up.shape:
        raise RuntimeError(f"silu_mul_quant: argument 'up' must have the shape of 'gate' "
                           f"{list(gate.shape)}, got {list(up.shape)}")
    if not gate.dtype.is_floating_point or up.dtype != gate.dtype:
        raise RuntimeError(f"silu_mul_quant: argument 'up' must have the floating dtype of "
                           f"'gate', got {gate.dtype} and {up.dtype}")


def reference(gate, up):
    """The ground truth: plain PyTorch, fp32 inside."""
    check(gate, up)
    h = torch.nn.functional.silu(gate.float()) * up.float()
    amax = h.abs().amax(-1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    y = torch.round(h * inv).clamp(-128, 127).to(torch.int8)
    return y, (amax / 127.0).squeeze(-1)


def fake(gate, up):
    """Shapes and dtypes only: what torch.compile needs to trace the op."""
    check(gate, up)
    return (torch.empty_like(gate, dtype=torch.int8),
            gate.new_empty(gate.shape[:-1], dtype=torch.float32))


def cpu_kernel(gate, up):
    """A per-device kernel: fp32 temporaries updated in place instead of new ones."""
    check(gate, up)
    h = torch.nn.functional.silu(gate.float()).mul_(up.float())
    amax = h.abs().amax(-1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    y = h.mul_(inv).round_().clamp_(-128, 127).to(torch.int8)
    return y, amax.div_(127.0).squeeze(-1)


def unfused(gate, up):
    """The unfused spelling the operator replaces: what a model writes without it."""
    return torch.ops.npu.npu_dynamic_quant(torch.nn.functional.silu(gate) * up)


silu_mul_quant = op_sdk.define_op(
    SCHEMA,
    namespace="my_ops",
    reference=reference,
    fake=fake,
    kernels={"cpu": cpu_kernel},  # other devices run the reference
    doc="silu(gate) * up, then per-token dynamic int8 quantisation.",
    # on the NPU: the aclnn API CANN generates from this operator's Ascend C OpDef
    # (kernels/ascendc/silu_mul_quant), bound OpPlugin-style (csrc/npu/silu_mul_quant.cpp)
    aclnn=op_sdk.AclnnBinding("aclnnSiluMulQuant", outputs=("y", "scale")),
    # its GE converter, declared: the Ascend IR SiluMulQuant (inputs gate, up; outputs y,
    # scale, as kernels/ascendc/silu_mul_quant/op_graph declares it), derived from the schema
    ge=GeIr("SiluMulQuant", outputs=("y", "scale")),
    # the unfused spelling: the fusion below is derived from it
    composite=op_sdk.Composite(unfused, outputs=("y", "scale")),
)

# the fusion silu(gate) * up -> npu_dynamic_quant => silu_mul_quant, traced at the first compile
op_sdk.register_fusion(silu_mul_quant)


def main() -> None:
    gate = torch.randn(257, 512, dtype=torch.bfloat16)
    up = torch.randn(257, 512, dtype=torch.bfloat16)
    y_eager, s_eager = torch.ops.my_ops.silu_mul_quant(gate, up)

    @torch.compile(fullgraph=True, dynamic=True)
    def block(g, u):
        y, s = torch.ops.my_ops.silu_mul_quant(g, u)
        return y.float() * s[:, None]  # dequantise: Inductor fuses this around the op

    out = block(gate, up)
    err = (out - y_eager.float() * s_eager[:, None]).abs().max().item()
    print(f"silu_mul_quant: eager y {tuple(y_eager.shape)} {y_eager.dtype}, compiled max error {err:.3g}")


if __name__ == "__main__":
    main()
