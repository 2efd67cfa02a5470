"""npu_add_rms_norm -> AddRmsNorm."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("AddRmsNorm", "x1 x2 gamma", "y rstd x", [("epsilon", "Float", 1e-6)])


@register_fx_node_ge_converter(torch.ops.npu.npu_add_rms_norm.default, torchair_has_own=True)
def convert_npu_add_rms_norm(x1, x2, gamma, epsilon=1e-6, meta_outputs=None):
    return ge.AddRmsNorm(x1, x2, gamma, epsilon=epsilon)
