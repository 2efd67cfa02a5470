"""npu_dtype_cast / _npu_dtype_cast -> Cast."""

import torch

from op_sdk.converters import ge, register_fx_node_ge_converter
from op_sdk.converters._util import dtype_of, ge_type, proto_type


@register_fx_node_ge_converter(torch.ops.npu.npu_dtype_cast.default, torchair_has_own=True)
def convert_npu_dtype_cast(input, dtype, input_dtype=None, meta_outputs=None):
    dst = dtype_of(dtype, "npu_dtype_cast", "dtype")
    out = ge.Cast(input, dst_type=ge_type(dst))
    if input_dtype is not None:  # the input's bytes read as another type
        out.op.input_desc[0].dtype = proto_type(dtype_of(input_dtype, "npu_dtype_cast",
                                                         "input_dtype"))
    out.desc.dtype = proto_type(dst)
    return out


@register_fx_node_ge_converter(torch.ops.npu._npu_dtype_cast.default, torchair_has_own=True)
def convert__npu_dtype_cast(input, dtype, meta_outputs=None):
    return ge.Cast(input, dst_type=ge_type(dtype_of(dtype, "_npu_dtype_cast", "dtype")))
