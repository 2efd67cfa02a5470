// Shape / dtype inference of DynamicQuantV2: y has x's shape, in the dst_type attribute's dtype
// (int8 by default; int4); scale and offset (fp32): x's shape without the last dim per token,
// [1] per tensor, x's shape without dim -2 per channel (quant_mode, attribute 2).
#include <cstring>

#include "register/op_impl_registry.h"

namespace ops {
static ge::graphStatus InferShapeDynamicQuantV2(gert::InferShapeContext *context)
{
    const gert::Shape *x = context->GetInputShape(0);
    gert::Shape *y = context->GetOutputShape(0);
    gert::Shape *scale = context->GetOutputShape(1);
    gert::Shape *offset = context->GetOutputShape(2);
    if (x == nullptr || y == nullptr || scale == nullptr || offset == nullptr || x->GetDimNum() < 2)
        return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    const char *mode = attrs ? attrs->GetStr(2) : nullptr;
    *y = *x;
    size_t rank = x->GetDimNum();
    if (mode != nullptr && std::strcmp(mode, "pertensor") == 0) {
        scale->SetDimNum(1);
        scale->SetDim(0, 1);
    } else if (mode != nullptr && std::strcmp(mode, "perchannel") == 0) {
        scale->SetDimNum(rank - 1);
        for (size_t i = 0; i + 2 < rank; ++i) scale->SetDim(i, x->GetDim(i));
        scale->SetDim(rank - 2, x->GetDim(rank - 1));
    } else if (mode == nullptr || std::strcmp(mode, "pertoken") == 0) {
        scale->SetDimNum(rank - 1);
        for (size_t i = 0; i + 1 < rank; ++i) scale->SetDim(i, x->GetDim(i));
    } else {
        return ge::GRAPH_FAILED;
    }
    *offset = *scale;
    return ge::GRAPH_SUCCESS;
}

static ge::graphStatus InferDataTypeDynamicQuantV2(gert::InferDataTypeContext *context)
{
    auto *attrs = context->GetAttrs();
    const int64_t *dstType = attrs ? attrs->GetAttrPointer<int64_t>(0) : nullptr;
    context->SetOutputDataType(0, dstType ? static_cast<ge::DataType>(*dstType) : ge::DT_INT8);
    context->SetOutputDataType(1, ge::DT_FLOAT);
    context->SetOutputDataType(2, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(DynamicQuantV2).InferShape(InferShapeDynamicQuantV2).InferDataType(InferDataTypeDynamicQuantV2);
}  // namespace ops
