// Ascend IR prototype of AddRmsNormCast, the graph operator that npu_add_rms_norm_cast maps to. Input,
// output and attribute names and order follow CANN's prototype of the same operator.
#ifndef OPSDK_ASCENDC_ADD_RMS_NORM_CAST_PROTO_H_
#define OPSDK_ASCENDC_ADD_RMS_NORM_CAST_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(AddRmsNormCast)
    .INPUT(x1, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(x2, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(gamma, TensorType({DT_FLOAT16, DT_BF16}))
    .OUTPUT(y1, TensorType({DT_FLOAT}))
    .OUTPUT(y2, TensorType({DT_FLOAT16, DT_BF16}))
    .OUTPUT(rstd, TensorType({DT_FLOAT}))
    .OUTPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .ATTR(epsilon, Float, 1e-6f)
    .OP_END_FACTORY_REG(AddRmsNormCast)
}  // namespace ge

#endif  // OPSDK_ASCENDC_ADD_RMS_NORM_CAST_PROTO_H_
