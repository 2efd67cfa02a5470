"""npu_dynamic_quant -> DynamicQuant (per token, no dst_type_max) or DynamicQuantV2
(per tensor / per channel, or a dst_type_max), as TorchAir converts it."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import dtype_of, ge_type, proto_type, refuse_int4

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("DynamicQuant", "x smooth_scales? group_index?", "y scale",
           [("dst_type", "Int", ir.GE_DTYPE["DT_INT8"])])
ir.declare("DynamicQuantV2", "x smooth_scales? group_index?", "y scale offset",
           [("dst_type", "Int", ir.GE_DTYPE["DT_INT8"]), ("is_symmetrical", "Bool", False),
            ("quant_mode", "String", "pertoken"), ("dst_type_max", "Float", 0.0)])


@register_fx_node_ge_converter(torch.ops.npu.npu_dynamic_quant.default, torchair_has_own=True)
def convert_npu_dynamic_quant(input, *, smooth_scales=None, group_index=None, dst_type=None,
                              quant_mode="pertoken", dst_type_max=0.0, meta_outputs=None):
    dst = dtype_of(dst_type, "npu_dynamic_quant", "dst_type", torch.int8)
    refuse_int4(dst, "npu_dynamic_quant", "dst_type")
    if quant_mode == "pertoken" and dst_type_max == 0.0:
        y, scale = ge.DynamicQuant(input, smooth_scales=smooth_scales, group_index=group_index,
                                   dst_type=ge_type(dst))
    else:
        y, scale, _ = ge.DynamicQuantV2(input, smooth_scales, group_index, dst_type=ge_type(dst),
                                        is_symmetrical=True, quant_mode=quant_mode,
                                        dst_type_max=dst_type_max)
    y.desc.dtype = proto_type(dst)
    return y, scale
