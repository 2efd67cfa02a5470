"""npu_rms_norm -> RmsNorm."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("RmsNorm", "x gamma", "y rstd", [("epsilon", "Float", 1e-6)])


@register_fx_node_ge_converter(torch.ops.npu.npu_rms_norm.default, torchair_has_own=True)
def convert_npu_rms_norm(input, gamma, epsilon=1e-6, meta_outputs=None):
    return ge.RmsNorm(input, gamma, epsilon=epsilon)
