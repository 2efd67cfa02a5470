// Shape / dtype inference of DynamicQuant (per token): y has x's shape, in the dst_type
// attribute's dtype (int8 by default; int4); scale = x's shape without the last dim, fp32.
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
    auto *attrs = context->GetAttrs();
    const int64_t *dstType = attrs ? attrs->GetAttrPointer<int64_t>(0) : nullptr;
    context->SetOutputDataType(0, dstType ? static_cast<ge::DataType>(*dstType) : ge::DT_INT8);
    context->SetOutputDataType(1, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(DynamicQuant).InferShape(InferShapeDynamicQuant).InferDataType(InferDataTypeDynamicQuant);
}  // namespace ops
