// Shape / dtype inference of AddRmsNorm: y and x like x1; rstd = x1's leading dims + 1 per
// gamma dim, fp32.
#include "../../common/infershape_common.h"

namespace ops {
static ge::graphStatus InferShapeAddRmsNorm(gert::InferShapeContext *context)
{
    const gert::Shape *x1 = context->GetInputShape(0);
    const gert::Shape *gamma = context->GetInputShape(2);
    gert::Shape *y = context->GetOutputShape(0);
    gert::Shape *rstd = context->GetOutputShape(1);
    gert::Shape *x = context->GetOutputShape(2);
    if (x1 == nullptr || gamma == nullptr || y == nullptr || rstd == nullptr || x == nullptr) return ge::GRAPH_FAILED;
    *y = *x1;
    *x = *x1;
    return opsdk_ascendc::InferRstdShape(*x1, *gamma, *rstd);
}

static ge::graphStatus InferDataTypeAddRmsNorm(gert::InferDataTypeContext *context)
{
    context->SetOutputDataType(0, context->GetInputDataType(0));
    context->SetOutputDataType(1, ge::DT_FLOAT);
    context->SetOutputDataType(2, context->GetInputDataType(0));
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(AddRmsNorm).InferShape(InferShapeAddRmsNorm).InferDataType(InferDataTypeAddRmsNorm);
}  // namespace ops
