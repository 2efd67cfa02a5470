"""npu_quant_matmul (and op_sdk's prepacked quant_matmul_packed) -> QuantBatchMatmulV3,
as TorchAir converts the int8 case on Atlas A2 / A3. The int4-in-int32, fp8 / MX,
per-group and per-block forms (x1_dtype, x2_dtype, scale dtypes, group_sizes, y_scale,
2-D scales) are written by TorchAir's own converter; op_sdk's raises naming the
argument."""

import torch

from op_sdk.converters import ge, ir, register_fx_node_ge_converter
from op_sdk.converters._util import dtype_of, ge_type, proto_type
from op_sdk.converters.graph import ConversionError

# the Ascend IR prototype(s) this slice builds (op_graph/<op>_proto.h)
ir.declare("QuantBatchMatmulV3", "x1 x2 scale offset? bias? pertoken_scale?", "y",
           [("dtype", "Int"), ("transpose_x1", "Bool", False), ("transpose_x2", "Bool", False)])


def _qbmm(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, name):
    if x1.desc.dtype != "DT_INT8" or x2.desc.dtype != "DT_INT8":
        raise ConversionError(f"GE conversion: {name}: only int8 x1 / x2 are converted here, "
                              f"got {x1.desc.dtype} / {x2.desc.dtype}")
    dst = dtype_of(output_dtype, name, "output_dtype", torch.int8)
    y = ge.QuantBatchMatmulV3(x1, x2, scale, offset=offset, bias=bias,
                              pertoken_scale=pertoken_scale, dtype=ge_type(dst),
                              transpose_x1=False, transpose_x2=False)
    y.desc.dtype = proto_type(dst)
    return y


@register_fx_node_ge_converter(torch.ops.npu.npu_quant_matmul.default, torchair_has_own=True)
def convert_npu_quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None,
                             output_dtype=None, x1_dtype=None, x2_dtype=None,
                             pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None,
                             y_scale=None, meta_outputs=None):
    for arg, v in (("x1_dtype", x1_dtype), ("x2_dtype", x2_dtype),
                   ("pertoken_scale_dtype", pertoken_scale_dtype), ("scale_dtype", scale_dtype),
                   ("group_sizes", group_sizes), ("y_scale", y_scale)):
        if v is not None:
            raise ConversionError(f"GE conversion: npu_quant_matmul: argument '{arg}' is "
                                  f"written by TorchAir's converter, not op_sdk's")
    for arg, t in (("scale", scale), ("pertoken_scale", pertoken_scale)):
        if t is not None and t.desc.shape is not None and len(t.desc.shape) >= 2:
            raise ConversionError(f"GE conversion: npu_quant_matmul: argument '{arg}' of "
                                  f"{len(t.desc.shape)} dims (per-block scales) is written by "
                                  f"TorchAir's converter, not op_sdk's")
    return _qbmm(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, "npu_quant_matmul")


@register_fx_node_ge_converter(torch.ops.op_sdk.quant_matmul_packed.default)
def convert_quant_matmul_packed(x1, x2, packed, scale, *, offset=None, pertoken_scale=None,
                                bias=None, output_dtype=None, meta_outputs=None):
    """The CPU prepacked form reads the same x2 (the packed copy is a CPU layout; on the NPU
    the graph engine's frozen-weight handling does that job)."""
    return _qbmm(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                 "quant_matmul_packed")
