"""my_ops::silu_mul_quant -> SiluMulQuant (GE converter, TorchAir's converter API)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype this slice builds: the operator's own (CANN has no SiluMulQuant; its
# SwiGlu / DequantSwigluQuant take one concatenated input), as
# kernels/ascendc/silu_mul_quant/op_graph/silu_mul_quant_proto.h declares it
ir.declare("SiluMulQuant", "gate up", "y scale",
           [],
           source="declared by kernels/ascendc/silu_mul_quant/op_graph/"
                  "silu_mul_quant_proto.h")


@register_fx_node_ge_converter(torch.ops.my_ops.silu_mul_quant.default)
def convert_silu_mul_quant(gate, up, meta_outputs=None):
    return ge.SiluMulQuant(gate, up)
