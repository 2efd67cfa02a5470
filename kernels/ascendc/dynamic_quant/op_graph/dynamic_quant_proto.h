// Ascend IR prototype of DynamicQuant, the graph operator that npu_dynamic_quant maps to. Input,
// output and attribute names and order follow CANN's prototype of the same operator. The output
// dtypes list what this project's kernel writes: int8 and int4 (CANN also lists float8 / hifloat8).
#ifndef OPSDK_ASCENDC_DYNAMIC_QUANT_PROTO_H_
#define OPSDK_ASCENDC_DYNAMIC_QUANT_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(DynamicQuant)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(smooth_scales, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(group_index, TensorType({DT_INT32}))
    .OUTPUT(y, TensorType({DT_INT8, DT_INT4}))
    .OUTPUT(scale, TensorType({DT_FLOAT}))
    .ATTR(dst_type, Int, DT_INT8)
    .OP_END_FACTORY_REG(DynamicQuant)
}  // namespace ge

#endif  // OPSDK_ASCENDC_DYNAMIC_QUANT_PROTO_H_
