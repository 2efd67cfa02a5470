// Shape / dtype inference of RmsNorm: y like x; rstd = x's leading dims + 1 per gamma dim, fp32.
#include "../../common/infershape_common.h"

namespace ops {
static ge::graphStatus InferShapeRmsNorm(gert::InferShapeContext *context)
{
    const gert::Shape *x = context->GetInputShape(0);
    const gert::Shape *gamma = context->GetInputShape(1);
    gert::Shape *y = context->GetOutputShape(0);
    gert::Shape *rstd = context->GetOutputShape(1);
    if (x == nullptr || gamma == nullptr || y == nullptr || rstd == nullptr) return ge::GRAPH_FAILED;
    *y = *x;
    return opsdk_ascendc::InferRstdShape(*x, *gamma, *rstd);
}

static ge::graphStatus InferDataTypeRmsNorm(gert::InferDataTypeContext *context)
{
    context->SetOutputDataType(0, context->GetInputDataType(0));
    context->SetOutputDataType(1, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(RmsNorm).InferShape(InferShapeRmsNorm).InferDataType(InferDataTypeRmsNorm);
}  // namespace ops
