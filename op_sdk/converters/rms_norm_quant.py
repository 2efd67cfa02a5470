"""npu_rms_norm_quant -> RmsNormQuant (ops-nn norm/rms_norm_quant; TorchAir has no converter of
it)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import dtype_of, refuse_int4

# the Ascend IR prototype (ops-nn norm/rms_norm_quant/op_host/rms_norm_quant_def.cpp: epsilon
# required, high_precision_mode / gemma_mode / dst_type optional)
ir.declare("RmsNormQuant", "x gamma beta scale offset", "y",
           [("epsilon", "Float"), ("high_precision_mode", "Bool", False),
            ("gemma_mode", "Bool", False), ("dst_type", "Int", ir.GE_DTYPE["DT_INT8"])])


@register_fx_node_ge_converter(torch.ops.npu.npu_rms_norm_quant.default)
def convert_npu_rms_norm_quant(x, gamma, beta, scale, offset, epsilon=1e-6, *, dst_dtype=None,
                               meta_outputs=None):
    refuse_int4(dtype_of(dst_dtype, "npu_rms_norm_quant", "dst_dtype", torch.int8),
                "npu_rms_norm_quant", "dst_dtype")
    return ge.RmsNormQuant(x, gamma, beta, scale, offset, epsilon=epsilon)
