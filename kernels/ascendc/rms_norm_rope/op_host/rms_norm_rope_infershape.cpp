// Shape / dtype inference of RmsNormRope: y like x (contiguous, as the fake allocates it).
#include "register/op_impl_registry.h"

namespace ops {
static ge::graphStatus InferShapeRmsNormRope(gert::InferShapeContext *context)
{
    const gert::Shape *x = context->GetInputShape(0);
    if (x == nullptr) return ge::GRAPH_FAILED;
    gert::Shape *out0 = context->GetOutputShape(0);
    if (out0 == nullptr) return ge::GRAPH_FAILED;
    *out0 = *x;
    return ge::GRAPH_SUCCESS;
}

static ge::graphStatus InferDataTypeRmsNormRope(gert::InferDataTypeContext *context)
{
    context->SetOutputDataType(0, context->GetInputDataType(0));
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(RmsNormRope).InferShape(InferShapeRmsNormRope).InferDataType(InferDataTypeRmsNormRope);
}  // namespace ops
