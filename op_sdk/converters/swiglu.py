"""npu_swiglu -> SwiGlu (TorchAir converts it too: its converter is compared in the
real-TorchAir tests)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype this slice builds (ops-nn activation/swi_glu: its OpDef's x, y, dim)
ir.declare("SwiGlu", "x", "y", [("dim", "Int", -1)])


@register_fx_node_ge_converter(torch.ops.npu.npu_swiglu.default, torchair_has_own=True)
def convert_npu_swiglu(input, dim=-1, meta_outputs=None):
    return ge.SwiGlu(input, dim=dim)
