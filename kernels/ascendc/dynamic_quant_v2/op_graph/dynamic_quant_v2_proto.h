// Ascend IR prototype of DynamicQuantV2, the graph operator that npu_dynamic_quant maps to for
// quant_mode "pertensor" / "perchannel" or a dst_type_max (torchair's converter of
// npu_dynamic_quant builds DynamicQuantV2(x, smooth_scales, group_index, dst_type,
// is_symmetrical=True, quant_mode, dst_type_max) and drops offset). Input, output and attribute
// names and order follow CANN's prototype of the same operator (ops-nn: quant/
// dynamic_quant_v2/op_graph/dynamic_quant_v2_proto.h). The output dtypes list what this
// project's kernel writes: int8 and int4 (CANN also lists float8 / hifloat8).
#ifndef OPSDK_ASCENDC_DYNAMIC_QUANT_V2_PROTO_H_
#define OPSDK_ASCENDC_DYNAMIC_QUANT_V2_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(DynamicQuantV2)
    .INPUT(x, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(smooth_scales, TensorType({DT_FLOAT16, DT_BF16}))
    .OPTIONAL_INPUT(group_index, TensorType({DT_INT32}))
    .OUTPUT(y, TensorType({DT_INT8, DT_INT4}))
    .OUTPUT(scale, TensorType({DT_FLOAT}))
    .OUTPUT(offset, TensorType({DT_FLOAT}))
    .ATTR(dst_type, Int, DT_INT8)
    .ATTR(is_symmetrical, Bool, false)
    .ATTR(quant_mode, String, "pertoken")
    .ATTR(dst_type_max, Float, 0.0)
    .OP_END_FACTORY_REG(DynamicQuantV2)
}  // namespace ge

#endif  // OPSDK_ASCENDC_DYNAMIC_QUANT_V2_PROTO_H_
