// Ascend IR prototype of RmsNorm, the graph operator that npu_rms_norm maps to. Input,
// output and attribute names and order follow CANN's prototype of the same operator.
#ifndef OPSDK_ASCENDC_RMS_NORM_PROTO_H_
#define OPSDK_ASCENDC_RMS_NORM_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(RmsNorm)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .INPUT(gamma, TensorType({DT_FLOAT, DT_FLOAT16, DT_BF16}))
    .OUTPUT(y, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .OUTPUT(rstd, TensorType({DT_FLOAT}))
    .ATTR(epsilon, Float, 1e-6f)
    .OP_END_FACTORY_REG(RmsNorm)
}  // namespace ge

#endif  // OPSDK_ASCENDC_RMS_NORM_PROTO_H_
