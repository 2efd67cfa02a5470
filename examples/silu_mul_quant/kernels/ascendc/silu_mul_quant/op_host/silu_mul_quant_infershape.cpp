// Shape / dtype inference of SiluMulQuant: y like gate in int8; scale = gate's shape without the
// last dim, fp32.
#include "register/op_impl_registry.h"

namespace ops {
static ge::graphStatus InferShapeSiluMulQuant(gert::InferShapeContext *context)
{
    const gert::Shape *gate = context->GetInputShape(0);
    const gert::Shape *up = context->GetInputShape(1);
    gert::Shape *y = context->GetOutputShape(0);
    gert::Shape *scale = context->GetOutputShape(1);
    if (gate == nullptr || up == nullptr || y == nullptr || scale == nullptr || gate->GetDimNum() < 1 || *gate != *up)
        return ge::GRAPH_FAILED;
    *y = *gate;
    scale->SetDimNum(gate->GetDimNum() - 1);
    for (size_t i = 0; i + 1 < gate->GetDimNum(); ++i) scale->SetDim(i, gate->GetDim(i));
    return ge::GRAPH_SUCCESS;
}

static ge::graphStatus InferDataTypeSiluMulQuant(gert::InferDataTypeContext *context)
{
    context->SetOutputDataType(0, ge::DT_INT8);
    context->SetOutputDataType(1, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(SiluMulQuant).InferShape(InferShapeSiluMulQuant).InferDataType(InferDataTypeSiluMulQuant);
}  // namespace ops
