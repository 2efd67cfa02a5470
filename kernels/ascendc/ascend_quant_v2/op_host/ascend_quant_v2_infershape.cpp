// Shape / dtype inference of AscendQuantV2: y has x's shape and the dst_type attribute's dtype
// (default int8; the kernel writes int8 and int4, its tiling rejects the others).
#include "register/op_impl_registry.h"

namespace ops {
static ge::graphStatus InferShapeAscendQuantV2(gert::InferShapeContext *context)
{
    const gert::Shape *x = context->GetInputShape(0);
    gert::Shape *y = context->GetOutputShape(0);
    if (x == nullptr || y == nullptr) return ge::GRAPH_FAILED;
    *y = *x;
    return ge::GRAPH_SUCCESS;
}

static ge::graphStatus InferDataTypeAscendQuantV2(gert::InferDataTypeContext *context)
{
    auto *attrs = context->GetAttrs();
    const int64_t *dstType = attrs ? attrs->GetAttrPointer<int64_t>(2) : nullptr;
    context->SetOutputDataType(0, dstType ? static_cast<ge::DataType>(*dstType) : ge::DT_INT8);
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(AscendQuantV2).InferShape(InferShapeAscendQuantV2).InferDataType(InferDataTypeAscendQuantV2);
}  // namespace ops
