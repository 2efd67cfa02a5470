"""npu_add_rms_norm_v2_functional -> AddRmsNorm on TensorMove copies of x1 and x2, its
outputs reordered to (rstd, y, x), as TorchAir converts it (its custom/npu_add_rms_norm_v2.py).
The in-place npu_add_rms_norm_v2 reaches the graph functionalized, as this twin."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter


@register_fx_node_ge_converter(torch.ops.npu.npu_add_rms_norm_v2_functional.default,
                               torchair_has_own=True)
def convert_npu_add_rms_norm_v2_functional(x1, x2, gamma, epsilon=1e-6, meta_outputs=None):
    y, rstd, x = ge.AddRmsNorm(ge.TensorMove(x1), ge.TensorMove(x2), gamma, epsilon=epsilon)
    return rstd, y, x


# the Ascend IR prototype of the in-place form (ops-nn norm/inplace_add_rms_norm/op_graph:
# REG_OP(InplaceAddRmsNorm), x1 and x2 updated in place as its outputs x1 and x2)
ir.declare("InplaceAddRmsNorm", "x1 x2 gamma", "x1 rstd x2", [("epsilon", "Float", 1e-6)])


@register_fx_node_ge_converter(torch.ops.npu.npu_add_rms_norm_v2.default)
def convert_npu_add_rms_norm_v2(x1, x2, gamma, epsilon=1e-6, meta_outputs=None):
    """The in-place form, where a graph keeps it (as npu_scatter_nd_update_ keeps
    ScatterNdUpdate on its input): InplaceAddRmsNorm on x1 and x2 themselves; returns rstd."""
    _, rstd, _ = ge.InplaceAddRmsNorm(x1, x2, gamma, epsilon=epsilon)
    return rstd
