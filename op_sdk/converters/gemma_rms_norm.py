"""npu_gemma_rms_norm -> GemmaRmsNorm (ops-nn norm/gemma_rms_norm; TorchAir has no converter
of it)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter

# the Ascend IR prototype (ops-nn norm/gemma_rms_norm/op_graph: REG_OP(GemmaRmsNorm))
ir.declare("GemmaRmsNorm", "x gamma", "y rstd", [("epsilon", "Float", 1e-6)])


@register_fx_node_ge_converter(torch.ops.npu.npu_gemma_rms_norm.default)
def convert_npu_gemma_rms_norm(input, gamma, epsilon=1e-6, meta_outputs=None):
    return ge.GemmaRmsNorm(input, gamma, epsilon=epsilon)
