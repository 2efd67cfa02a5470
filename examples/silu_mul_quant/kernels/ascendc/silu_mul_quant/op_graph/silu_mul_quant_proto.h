// Ascend IR prototype of SiluMulQuant, the graph operator of my_ops::silu_mul_quant
// (my_ops/ops/silu_mul_quant.py: silu(gate) * up, then per-token dynamic int8 quantisation). The operator is the project's own: CANN has no operator of this name or
// interface (its SwiGlu / DequantSwigluQuant take one concatenated input), so the names follow
// the plugin's schema, silu_mul_quant(Tensor gate, Tensor up) -> (Tensor y, Tensor scale).
#ifndef OPSDK_ASCENDC_SILU_MUL_QUANT_PROTO_H_
#define OPSDK_ASCENDC_SILU_MUL_QUANT_PROTO_H_

#include "graph/operator_reg.h"

namespace ge {
REG_OP(SiluMulQuant)
    .INPUT(gate, TensorType({DT_FLOAT16, DT_BF16}))
    .INPUT(up, TensorType({DT_FLOAT16, DT_BF16}))
    .OUTPUT(y, TensorType({DT_INT8}))
    .OUTPUT(scale, TensorType({DT_FLOAT}))
    .OP_END_FACTORY_REG(SiluMulQuant)
}  // namespace ge

#endif  // OPSDK_ASCENDC_SILU_MUL_QUANT_PROTO_H_
