"""npu_clipped_swiglu -> ClippedSwiglu (TorchAir converts it too: its converter is compared in
the real-TorchAir tests)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype (ops-nn activation/clipped_swiglu/op_graph/clipped_swiglu_proto.h:
# REG_OP(ClippedSwiglu)); its clamp_mode attribute (Version 2, Ascend 950's
# aclnnClippedSwigluV2) is left out, as in TorchAir's copy of the prototype: the operator's
# mode is 0, the attribute's default
ir.declare("ClippedSwiglu", "x group_index?", "y",
           [("dim", "Int", -1), ("alpha", "Float", 1.702), ("limit", "Float", 7.0),
            ("bias", "Float", 1.0), ("interleaved", "Bool", True)])


@register_fx_node_ge_converter(torch.ops.npu.npu_clipped_swiglu.default, torchair_has_own=True)
def convert_npu_clipped_swiglu(x, *, group_index=None, dim=-1, alpha=1.702, limit=7.0, bias=1.0,
                               interleaved=True, meta_outputs=None):
    return ge.ClippedSwiglu(x, group_index, dim=dim, alpha=alpha, limit=limit, bias=bias,
                            interleaved=interleaved)
