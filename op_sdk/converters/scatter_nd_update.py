"""npu_scatter_nd_update -> TensorMove + ScatterNdUpdate (a copy, updated);
npu_scatter_nd_update_ -> ScatterNdUpdate on the input itself."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("ScatterNdUpdate", "var indices updates", "var", [("use_locking", "Bool", False)],
           source="ops-math")


@register_fx_node_ge_converter(torch.ops.npu.npu_scatter_nd_update.default, torchair_has_own=True)
def convert_npu_scatter_nd_update(input, indices, updates, meta_outputs=None):
    return ge.ScatterNdUpdate(ge.TensorMove(input), indices, updates)


@register_fx_node_ge_converter(torch.ops.npu.npu_scatter_nd_update_.default, torchair_has_own=True)
def convert_npu_scatter_nd_update_(input, indices, updates, meta_outputs=None):
    return ge.ScatterNdUpdate(input, indices, updates)
