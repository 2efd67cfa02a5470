// Ascend IR prototype of AddRmsNormDynamicQuant, the graph operator that
// npu_add_rms_norm_dynamic_quant maps to. Input, output and attribute names and order follow
// CANN's prototype of the same operator (ops-nn: norm/add_rms_norm_dynamic_quant/op_graph/
// add_rms_norm_dynamic_quant_proto.h; torchair's converter of npu_add_rms_norm_dynamic_quant
// builds it). The output dtypes list only what this project's kernel writes (int8, int4): CANN's
// prototype also lists hifloat8 and float8 outputs.
#ifndef OPSDK_ASCENDC_ADD_RMS_NORM_DYNAMIC_QUANT_PROTO_H_
#define OPSDK_ASCENDC_ADD_RMS_NORM_DYNAMIC_QUANT_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(AddRmsNormDynamicQuant)
    .INPUT(x1, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(x2, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(gamma, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(smooth_scale1, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(smooth_scale2, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(beta, TensorType({DT_FLOAT16, DT_BF16}))
    .OUTPUT(y1, TensorType({DT_INT8, DT_INT4}))
    .OUTPUT(y2, TensorType({DT_INT8, DT_INT4}))
    .OUTPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .OUTPUT(scale1, TensorType({DT_FLOAT}))
    .OUTPUT(scale2, TensorType({DT_FLOAT}))
    .ATTR(epsilon, Float, 1e-6f)
    .ATTR(output_mask, ListBool, {})
    .ATTR(dst_type, Int, DT_INT8)
    .OP_END_FACTORY_REG(AddRmsNormDynamicQuant)
}  // namespace ge

#endif  // OPSDK_ASCENDC_ADD_RMS_NORM_DYNAMIC_QUANT_PROTO_H_
