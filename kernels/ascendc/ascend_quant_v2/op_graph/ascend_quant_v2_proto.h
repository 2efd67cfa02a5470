// Ascend IR prototype of AscendQuantV2, the graph operator that npu_quantize maps to with
// div_mode=False (torchair's converter of npu_quantize builds AscendQuantV2(x, scales,
// zero_points, sqrt_mode=False, round_mode="round", dst_type, axis) there, axis coerced to -1
// unless -2). Input, output and attribute names and order follow CANN's prototype of the same
// operator (quantize_ops.h of the op_proto headers; OpDef in ops-nn: quant/ascend_quant_v2/
// op_host/ascend_quant_v2_def.cpp). The output dtypes list int8 and int4, the ones this
// project's kernel writes (CANN also lists hifloat8, float8).
#ifndef OPSDK_ASCENDC_ASCEND_QUANT_V2_PROTO_H_
#define OPSDK_ASCENDC_ASCEND_QUANT_V2_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(AscendQuantV2)
    .INPUT(x, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .INPUT(scale, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OPTIONAL_INPUT(offset, TensorType({DT_FLOAT16, DT_FLOAT, DT_BF16}))
    .OUTPUT(y, TensorType({DT_INT8, DT_INT4}))
    .ATTR(sqrt_mode, Bool, false)
    .ATTR(round_mode, String, "round")
    .ATTR(dst_type, Int, DT_INT8)
    .ATTR(axis, Int, -1)
    .OP_END_FACTORY_REG(AscendQuantV2)
}  // namespace ge

#endif  // OPSDK_ASCENDC_ASCEND_QUANT_V2_PROTO_H_
