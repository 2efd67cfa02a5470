"""npu_swiglu_quant -> SwiGluQuant (TorchAir has no converter of its own for it): the
quant_mode integer as the IR's string attribute, dst_type as GE's DT_INT8."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.ops.swiglu_quant import QUANT_MODES

# the Ascend IR prototype this slice builds (ops-nn quant/swi_glu_quant: REG_OP(SwiGluQuant))
ir.declare("SwiGluQuant", "x smooth_scales? offsets? group_index?", "y scale",
           [("activate_left", "Bool", False), ("quant_mode", "String", "dynamic"),
            ("group_list_type", "Int", 0), ("dst_type", "Int", ir.GE_DTYPE["DT_INT8"])])


@register_fx_node_ge_converter(torch.ops.npu.npu_swiglu_quant.default)
def convert_npu_swiglu_quant(x, *, smooth_scales=None, offsets=None, group_index=None,
                             activate_left=False, quant_mode=0, group_list_type=0,
                             dst_type=None, meta_outputs=None):
    return ge.SwiGluQuant(x, smooth_scales, offsets, group_index, activate_left=activate_left,
                          quant_mode=QUANT_MODES[quant_mode], group_list_type=group_list_type,
                          dst_type=ir.GE_DTYPE["DT_INT8"])
