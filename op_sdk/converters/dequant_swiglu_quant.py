"""npu_dequant_swiglu_quant -> DequantSwigluQuant (TorchAir converts it too: its converter is
compared in the real-TorchAir tests): quant_mode as the IR's string attribute, the int8
output as GE's DT_INT8, round_mode "rint", activate_dim -1 (the only values the operator
takes besides None)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.ops.dequant_swiglu_quant import QUANT_MODES

# the Ascend IR prototype (ops-nn quant/dequant_swiglu_quant/op_graph/
# dequant_swiglu_quant_proto.h: REG_OP(DequantSwigluQuant))
ir.declare("DequantSwigluQuant",
           "x weight_scale? activation_scale? bias? quant_scale? quant_offset? group_index?",
           "y scale",
           [("activate_left", "Bool", False), ("quant_mode", "String", "static"),
            ("dst_type", "Int", ir.GE_DTYPE["DT_INT8"]), ("round_mode", "String", "rint"),
            ("activate_dim", "Int", -1), ("swiglu_mode", "Int", 0),
            ("clamp_limit", "Float", 7.0), ("glu_alpha", "Float", 1.702),
            ("glu_bias", "Float", 1.0)])


@register_fx_node_ge_converter(torch.ops.npu.npu_dequant_swiglu_quant.default,
                               torchair_has_own=True)
def convert_npu_dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None,
                                     quant_scale=None, quant_offset=None, group_index=None,
                                     activate_left=False, quant_mode=0, dst_type=None,
                                     round_mode=None, activate_dim=None, swiglu_mode=0,
                                     clamp_limit=7.0, glu_alpha=1.702, glu_bias=1.0,
                                     meta_outputs=None):
    return ge.DequantSwigluQuant(x, weight_scale, activation_scale, bias, quant_scale,
                                 quant_offset, group_index, activate_left=activate_left,
                                 quant_mode=QUANT_MODES[quant_mode],
                                 dst_type=ir.GE_DTYPE["DT_INT8"], round_mode="rint",
                                 activate_dim=-1, swiglu_mode=swiglu_mode,
                                 clamp_limit=clamp_limit, glu_alpha=glu_alpha, glu_bias=glu_bias)
