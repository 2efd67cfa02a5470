// Shape / dtype inference of AddRmsNormQuant: y1, y2 like x1 in int8 (y2 always, all zeros
// without scales2); x like x1.
#include "register/op_impl_registry.h"

namespace ops {
static ge::graphStatus InferShapeAddRmsNormQuant(gert::InferShapeContext *context)
{
    const gert::Shape *x1 = context->GetInputShape(0);
    gert::Shape *y1 = context->GetOutputShape(0);
    gert::Shape *y2 = context->GetOutputShape(1);
    gert::Shape *x = context->GetOutputShape(2);
    if (x1 == nullptr || y1 == nullptr || y2 == nullptr || x == nullptr) return ge::GRAPH_FAILED;
    *y1 = *x1;
    *y2 = *x1;
    *x = *x1;
    return ge::GRAPH_SUCCESS;
}

static ge::graphStatus InferDataTypeAddRmsNormQuant(gert::InferDataTypeContext *context)
{
    context->SetOutputDataType(0, ge::DT_INT8);
    context->SetOutputDataType(1, ge::DT_INT8);
    context->SetOutputDataType(2, context->GetInputDataType(0));
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(AddRmsNormQuant).InferShape(InferShapeAddRmsNormQuant).InferDataType(InferDataTypeAddRmsNormQuant);
}  // namespace ops
