"""npu_rms_norm_dynamic_mx_quant -> RmsNormDynamicMxQuant (TorchAir converts it too: its converter is
compared in the real-TorchAir tests), as npu_dynamic_mx_quant's (op_sdk/converters/
dynamic_mx_quant.py): float8 outputs; rstd asked for (output_rstd true: op_sdk's operator
returns it, TorchAir's converter writes false)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters.dynamic_mx_quant import NORM_ATTRS, float8_type, typed

# the Ascend IR prototype (ops-nn norm/rms_norm_dynamic_mx_quant/op_graph/rms_norm_dynamic_mx_quant_proto.h)
ir.declare("RmsNormDynamicMxQuant", "x gamma beta?", "y mxscale rstd", NORM_ATTRS)


@register_fx_node_ge_converter(torch.ops.npu.npu_rms_norm_dynamic_mx_quant.default,
                               torchair_has_own=True)
def convert_npu_rms_norm_dynamic_mx_quant(x, gamma, *, beta=None, epsilon=1e-6, scale_alg=0,
                                          round_mode="rint", dst_type=296, meta_outputs=None):
    name = float8_type("npu_rms_norm_dynamic_mx_quant", dst_type)
    y, mxscale, rstd = ge.RmsNormDynamicMxQuant(
        x, gamma, beta, epsilon=epsilon, scale_alg=scale_alg, round_mode=round_mode,
        dst_type=ir.GE_DTYPE[name], output_rstd=True)
    typed(y, mxscale, name)
    return y, mxscale, rstd
