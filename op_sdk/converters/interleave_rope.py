"""npu_interleave_rope -> InterleaveRope (ops-transformer posembedding/interleave_rope), as
TorchAir converts it too."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype (ops-transformer posembedding/interleave_rope/op_graph:
# REG_OP(InterleaveRope))
ir.declare("InterleaveRope", "x cos sin", "y", source="ops-transformer")


@register_fx_node_ge_converter(torch.ops.npu.npu_interleave_rope.default, torchair_has_own=True)
def convert_npu_interleave_rope(x, cos, sin, meta_outputs=None):
    return ge.InterleaveRope(x, cos, sin)
