"""npu_add_rms_norm_dynamic_quant -> AddRmsNormDynamicQuant, as TorchAir converts it: the
outputs output_mask switches off (or, without a mask, y2 / scale2 when there is no second
smooth scale) become empty constants."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import dtype_of, ge_type, proto_type, refuse_int4

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("AddRmsNormDynamicQuant", "x1 x2 gamma smooth_scale1? smooth_scale2? beta?",
           "y1 y2 x scale1 scale2", [("epsilon", "Float", 1e-6), ("output_mask", "ListBool", []),
                                     ("dst_type", "Int", ir.GE_DTYPE["DT_INT8"])])


@register_fx_node_ge_converter(torch.ops.npu.npu_add_rms_norm_dynamic_quant.default, torchair_has_own=True)
def convert_npu_add_rms_norm_dynamic_quant(x1, x2, gamma, *, smooth_scale1=None,
                                           smooth_scale2=None, beta=None, epsilon=1e-6,
                                           output_mask=None, y_dtype=None, meta_outputs=None):
    dst = dtype_of(y_dtype, "npu_add_rms_norm_dynamic_quant", "y_dtype", torch.int8)
    refuse_int4(dst, "npu_add_rms_norm_dynamic_quant", "y_dtype")
    mask = list(output_mask) if output_mask is not None else []
    y1, y2, x, scale1, scale2 = ge.AddRmsNormDynamicQuant(
        x1, x2, gamma, smooth_scale1=smooth_scale1, smooth_scale2=smooth_scale2, beta=beta,
        epsilon=epsilon, output_mask=mask, dst_type=ge_type(dst))
    y1.desc.dtype = y2.desc.dtype = proto_type(dst)
    if output_mask is None:
        out_y1, out_y2 = True, smooth_scale1 is not None and smooth_scale2 is not None
    else:
        out_y1, out_y2 = bool(output_mask[0]), bool(output_mask[1])
    if not out_y1:
        y1, scale1 = ge.Const([], dtype=dst), ge.Const([], dtype=torch.float32)
    if not out_y2:
        y2, scale2 = ge.Const([], dtype=dst), ge.Const([], dtype=torch.float32)
    return y1, y2, x, scale1, scale2
