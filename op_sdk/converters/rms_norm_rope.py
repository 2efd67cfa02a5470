"""op_sdk::rms_norm_rope -> RmsNormRope, op_sdk's own Ascend IR operator (its Ascend C kernel:
kernels/ascendc/rms_norm_rope; CANN has none). Its OpDef takes cos / sin of x's dtype: others
are cast to it first (the contract's rule, as npu_rotary_mul's converter does)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters.rotary_mul import _as

# the Ascend IR prototype this slice builds (kernels/ascendc/rms_norm_rope/op_graph/
# rms_norm_rope_proto.h)
ir.declare("RmsNormRope", "x gamma cos sin", "y",
           [("epsilon", "Float", 1e-06)],
           source="declared by kernels/ascendc/rms_norm_rope/op_graph/"
                  "rms_norm_rope_proto.h")


@register_fx_node_ge_converter(torch.ops.op_sdk.rms_norm_rope.default)
def convert_rms_norm_rope(x, gamma, cos, sin, epsilon=1e-06, meta_outputs=None):
    return ge.RmsNormRope(x, gamma, _as(cos, x), _as(sin, x), epsilon=epsilon)
