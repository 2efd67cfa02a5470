// Shape / dtype inference of AddRmsNormCast: y1 (fp32), y2 and x like x1; rstd = x1's
// leading dims + 1 per gamma dim, fp32.
#include "../../common/infershape_common.h"

namespace ops {
static ge::graphStatus InferShapeAddRmsNormCast(gert::InferShapeContext *context)
{
    const gert::Shape *x1 = context->GetInputShape(0);
    const gert::Shape *gamma = context->GetInputShape(2);
    gert::Shape *y1 = context->GetOutputShape(0);
    gert::Shape *y2 = context->GetOutputShape(1);
    gert::Shape *rstd = context->GetOutputShape(2);
    gert::Shape *x = context->GetOutputShape(3);
    if (x1 == nullptr || gamma == nullptr || y1 == nullptr || y2 == nullptr || rstd == nullptr || x == nullptr)
        return ge::GRAPH_FAILED;
    *y1 = *x1;
    *y2 = *x1;
    *x = *x1;
    return opsdk_ascendc::InferRstdShape(*x1, *gamma, *rstd);
}

static ge::graphStatus InferDataTypeAddRmsNormCast(gert::InferDataTypeContext *context)
{
    context->SetOutputDataType(0, ge::DT_FLOAT);
    context->SetOutputDataType(1, context->GetInputDataType(0));
    context->SetOutputDataType(2, ge::DT_FLOAT);
    context->SetOutputDataType(3, context->GetInputDataType(0));
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(AddRmsNormCast).InferShape(InferShapeAddRmsNormCast).InferDataType(InferDataTypeAddRmsNormCast);
}  // namespace ops
