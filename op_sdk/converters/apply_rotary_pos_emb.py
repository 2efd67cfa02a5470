"""npu_apply_rotary_pos_emb -> TensorMove of query and key, then ApplyRotaryPosEmb (layout as
the IR's integer, rotary_mode its string), as TorchAir converts it: the IR operator updates
its query / key in place, so it runs on copies and the operator's inputs stay unwritten."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.ops.apply_rotary_pos_emb import LAYOUTS

# the Ascend IR prototype (ops-transformer posembedding/apply_rotary_pos_emb/op_graph:
# REG_OP(ApplyRotaryPosEmb))
ir.declare("ApplyRotaryPosEmb", "query key cos sin", "query key",
           [("layout", "Int", 1), ("rotary_mode", "String", "half")], source="ops-transformer")


@register_fx_node_ge_converter(torch.ops.npu.npu_apply_rotary_pos_emb.default,
                               torchair_has_own=True)
def convert_npu_apply_rotary_pos_emb(query, key, cos, sin, layout="BSND", rotary_mode="half",
                                     meta_outputs=None):
    return ge.ApplyRotaryPosEmb(ge.TensorMove(query), ge.TensorMove(key), cos, sin,
                                layout=LAYOUTS[layout][0], rotary_mode=rotary_mode)
