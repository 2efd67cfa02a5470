// Ascend IR prototype of AddRmsNormQuant, the graph operator that npu_add_rms_norm_quant maps
// to. Input, output and attribute names and order follow CANN's prototype of the same operator
// (ops-nn: norm/add_rms_norm_quant/op_graph/add_rms_norm_quant_proto.h): note scales2 comes
// before zero_points1 there, unlike npu_add_rms_norm_quant's argument order. The dtypes list
// only what this project's kernel supports: x fp16 with fp32 scales and int32 zero points, or
// all bf16; int8 outputs (CANN also lists fp32 x, fp16 scales, hifloat8 / float8 outputs).
#ifndef OPSDK_ASCENDC_ADD_RMS_NORM_QUANT_PROTO_H_
#define OPSDK_ASCENDC_ADD_RMS_NORM_QUANT_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(AddRmsNormQuant)
    .INPUT(x1, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(x2, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(gamma, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(scales1, TensorType({DT_FLOAT, DT_BF16}))
    .OPTIONAL_INPUT(scales2, TensorType({DT_FLOAT, DT_BF16}))
    .OPTIONAL_INPUT(zero_points1, TensorType({DT_INT32, DT_BF16}))
    .OPTIONAL_INPUT(zero_points2, TensorType({DT_INT32, DT_BF16}))
    .OPTIONAL_INPUT(beta, TensorType({DT_FLOAT16, DT_BF16}))
    .OUTPUT(y1, TensorType({DT_INT8}))
    .OUTPUT(y2, TensorType({DT_INT8}))
    .OUTPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .ATTR(axis, Int, -1)
    .ATTR(epsilon, Float, 1e-6f)
    .ATTR(div_mode, Bool, true)
    .ATTR(dst_type, Int, DT_INT8)
    .OP_END_FACTORY_REG(AddRmsNormQuant)
}  // namespace ge

#endif  // OPSDK_ASCENDC_ADD_RMS_NORM_QUANT_PROTO_H_
