// Ascend IR prototype of RmsNormRope (op_sdk::rms_norm_rope); the GE converter
// (op_sdk/converters/rms_norm_rope.py) declares the same and builds it.
#ifndef OPSDK_RMS_NORM_ROPE_PROTO_H_
#define OPSDK_RMS_NORM_ROPE_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(RmsNormRope)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .INPUT(gamma, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .INPUT(cos, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .INPUT(sin, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .OUTPUT(y, TensorType({DT_FLOAT16, DT_BF16, DT_FLOAT}))
    .ATTR(epsilon, Float, 1e-06f)
    .OP_END_FACTORY_REG(RmsNormRope)
}  // namespace ge

#endif  // OPSDK_RMS_NORM_ROPE_PROTO_H_
