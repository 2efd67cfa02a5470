"""npu_dynamic_mx_quant -> DynamicMxQuant (TorchAir converts it too: its converter is compared
in the real-TorchAir tests): dst_type as GE's data type, y's descriptor the float8 type,
mxscale's DT_FLOAT8_E8M0. float4 outputs, which GE holds as DT_FLOAT4_* and torch as uint8
pairs (TorchAir's converters add a Bitcast / Reshape), are not written by op_sdk's converters
(nor by the fused MX norms', which share these helpers)."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import ConversionError
from op_sdk.ops._mx import FLOAT8_E4M3_CODES, FLOAT8_E5M2_CODES

# the Ascend IR prototype (ops-nn quant/dynamic_mx_quant/op_graph/dynamic_mx_quant_proto.h)
ir.declare("DynamicMxQuant", "x", "y mxscale",
           [("axis", "Int", -1), ("round_mode", "String", "rint"),
            ("dst_type", "Int", ir.GE_DTYPE["DT_FLOAT4_E2M1"]), ("blocksize", "Int", 32),
            ("scale_alg", "Int", 0), ("dst_type_max", "Float", 0.0),
            ("max_low_bound", "Float", 0.0)])
# the fused norms' attributes (norm/{rms,add_rms}_norm_dynamic_mx_quant/op_graph/*_proto.h)
NORM_ATTRS = [("epsilon", "Float", 1e-6), ("scale_alg", "Int", 0),
              ("round_mode", "String", "rint"), ("dst_type", "Int", 40),
              ("output_rstd", "Bool", False)]


def float8_type(op: str, dst_type) -> str:
    if dst_type in FLOAT8_E5M2_CODES or dst_type == torch.float8_e5m2:
        return "DT_FLOAT8_E5M2"
    if dst_type in FLOAT8_E4M3_CODES or dst_type == torch.float8_e4m3fn:
        return "DT_FLOAT8_E4M3FN"
    raise ConversionError(f"GE conversion: {op}: argument 'dst_type' = {dst_type!r}: float4 "
                          f"outputs (uint8 pairs in torch, DT_FLOAT4_* in GE) are not written "
                          f"by op_sdk's converter (TorchAir's converter bitcasts them)")


def typed(y, mxscale, name):
    y.desc.dtype = name
    mxscale.desc.dtype = "DT_FLOAT8_E8M0"


@register_fx_node_ge_converter(torch.ops.npu.npu_dynamic_mx_quant.default, torchair_has_own=True)
def convert_npu_dynamic_mx_quant(input, *, axis=-1, round_mode="rint", dst_type=296,
                                 block_size=32, scale_alg=0, dst_type_max=0.0,
                                 max_low_bound=0.0, meta_outputs=None):
    name = float8_type("npu_dynamic_mx_quant", dst_type)
    y, mxscale = ge.DynamicMxQuant(input, axis=axis, round_mode=round_mode,
                                   dst_type=ir.GE_DTYPE[name], blocksize=block_size,
                                   scale_alg=0 if scale_alg is None else scale_alg,
                                   dst_type_max=dst_type_max, max_low_bound=max_low_bound)
    typed(y, mxscale, name)
    return y, mxscale
