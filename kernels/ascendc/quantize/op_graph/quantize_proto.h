// Ascend IR prototype of Quantize, the graph operator that npu_quantize maps to with
// div_mode=True (torchair's converter of npu_quantize builds Quantize(x, scales, zero_points,
// dtype="torch.qint8" | ..., axis) there, and AscendQuantV2 with div_mode=False:
// ascend_quant_v2/op_graph). Input, output and attribute names and order follow CANN's
// prototype of the same operator (quantize_ops.h of the op_proto headers). The dtypes list only
// what this project's kernel supports: int8, uint8 and int32 outputs; x fp16 with fp32 scales
// and int32 zero points, all bf16, or x fp32 with fp32 scales and int32 zero points (CANN also
// lists int8 / uint8 / fp32 zero points and float8 outputs).
#ifndef OPSDK_ASCENDC_QUANTIZE_PROTO_H_
#define OPSDK_ASCENDC_QUANTIZE_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(Quantize)
    .INPUT(x, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .INPUT(scales, TensorType({DT_FLOAT, DT_BF16}))
    .OPTIONAL_INPUT(zero_points, TensorType({DT_INT32, DT_BF16}))
    .OUTPUT(y, TensorType({DT_INT8, DT_UINT8, DT_INT32}))
    .REQUIRED_ATTR(dtype, String)
    .ATTR(axis, Int, 1)
    .OP_END_FACTORY_REG(Quantize)
}  // namespace ge

#endif  // OPSDK_ASCENDC_QUANTIZE_PROTO_H_
