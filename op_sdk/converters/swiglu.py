"""npu_swiglu -> SwiGlu, npu_swiglu_backward -> SwiGluGrad (TorchAir converts both too: its
converters are compared in the real-TorchAir tests)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype this slice builds (ops-nn activation/swi_glu: its OpDef's x, y, dim)
ir.declare("SwiGlu", "x", "y", [("dim", "Int", -1)])
ir.declare("SwiGluGrad", "y_grad x", "y", [("dim", "Int", -1)])  # REG_OP names it y (the OpDef x_grad)


@register_fx_node_ge_converter(torch.ops.npu.npu_swiglu.default, torchair_has_own=True)
def convert_npu_swiglu(input, dim=-1, meta_outputs=None):
    return ge.SwiGlu(input, dim=dim)


@register_fx_node_ge_converter(torch.ops.npu.npu_swiglu_backward.default, torchair_has_own=True)
def convert_npu_swiglu_backward(grad_output, input, dim=-1, meta_outputs=None):
    return ge.SwiGluGrad(grad_output, input, dim=dim)
