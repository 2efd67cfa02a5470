// Shape / dtype inference of AddRmsNormQuant: y1, y2 like x1 in dst_type (attribute 3: int8 by
// default; float8_e5m2 / float8_e4m3fn / hifloat8 on Ascend 950), y2 always (all zeros without
// scales2); x like x1.
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
    ge::DataType y = ge::DT_INT8;
    const gert::RuntimeAttrs *attrs = context->GetAttrs();
    const int64_t *dstType = attrs != nullptr ? attrs->GetAttrPointer<int64_t>(3) : nullptr;
    if (dstType != nullptr) y = static_cast<ge::DataType>(*dstType);
    if (y != ge::DT_INT8 && y != ge::DT_FLOAT8_E5M2 && y != ge::DT_FLOAT8_E4M3FN && y != ge::DT_HIFLOAT8) {
        return ge::GRAPH_FAILED;
    }
    context->SetOutputDataType(0, y);
    context->SetOutputDataType(1, y);
    context->SetOutputDataType(2, context->GetInputDataType(0));
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(AddRmsNormQuant).InferShape(InferShapeAddRmsNormQuant).InferDataType(InferDataTypeAddRmsNormQuant);
}  // namespace ops
