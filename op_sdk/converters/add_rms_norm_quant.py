"""npu_add_rms_norm_quant -> AddRmsNormQuant (TorchAir has no converter of it).

The operator's argument order (scales1, zero_points1, beta, scales2, zero_points2) is not
the prototype's (scales1, scales2, zero_points1, zero_points2, beta): inputs are passed by
name. dst_type (a ScalarType code, int8 when absent) becomes the ge::DataType code.
"""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import dtype_of, ge_type, proto_type

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("AddRmsNormQuant", "x1 x2 gamma scales1 scales2? zero_points1? zero_points2? beta?",
           "y1 y2 x", [("axis", "Int", -1), ("epsilon", "Float", 1e-6), ("div_mode", "Bool", True),
                       ("dst_type", "Int", ir.GE_DTYPE["DT_INT8"])])


@register_fx_node_ge_converter(torch.ops.npu.npu_add_rms_norm_quant.default)
def convert_npu_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1=None, beta=None,
                                   scales2=None, zero_points2=None, *, axis=-1, epsilon=1e-6,
                                   div_mode=True, dst_type=None, meta_outputs=None):
    dst = dtype_of(dst_type, "npu_add_rms_norm_quant", "dst_type", torch.int8)
    y1, y2, x = ge.AddRmsNormQuant(
        x1, x2, gamma, scales1, scales2=scales2, zero_points1=zero_points1,
        zero_points2=zero_points2, beta=beta, axis=axis, epsilon=epsilon, div_mode=div_mode,
        dst_type=ge_type(dst))
    y1.desc.dtype = y2.desc.dtype = proto_type(dst)
    return y1, y2, x
