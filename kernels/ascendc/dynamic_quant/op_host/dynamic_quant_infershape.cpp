// Shape / dtype inference of DynamicQuant (int8, per token): y like x in int8; scale = x's
// shape without the last dim, fp32.
#include "register/op_impl_registry.h"

namespace ops {
static ge::graphStatus InferShapeDynamicQuant(gert::InferShapeContext *context)
{
    const gert::Shape *x = context->GetInputShape(0);
    gert::Shape *y = context->GetOutputShape(0);
    gert::Shape *scale = context->GetOutputShape(1);
    if (x == nullptr || y == nullptr || scale == nullptr || x->GetDimNum() < 2) return ge::GRAPH_FAILED;
    *y = *x;
    scale->SetDimNum(x->GetDimNum() - 1);
    for (size_t i = 0; i + 1 < x->GetDimNum(); ++i) scale->SetDim(i, x->GetDim(i));
    return ge::GRAPH_SUCCESS;
}

static ge::graphStatus InferDataTypeDynamicQuant(gert::InferDataTypeContext *context)
{
    context->SetOutputDataType(0, ge::DT_INT8);
    context->SetOutputDataType(1, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(DynamicQuant).InferShape(InferShapeDynamicQuant).InferDataType(InferDataTypeDynamicQuant);
}  // namespace ops
