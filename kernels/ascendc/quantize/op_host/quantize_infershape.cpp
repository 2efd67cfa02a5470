// Shape / dtype inference of Quantize: y has x's shape; its dtype is the dtype attribute's
// (torch.qint8 / torch.int8 -> int8, torch.quint8 / torch.uint8 -> uint8, torch.qint32 /
// torch.int32 -> int32; the kernel writes all three).
#include <cstring>

#include "register/op_impl_registry.h"

namespace ops {
static ge::graphStatus InferShapeQuantize(gert::InferShapeContext *context)
{
    const gert::Shape *x = context->GetInputShape(0);
    gert::Shape *y = context->GetOutputShape(0);
    if (x == nullptr || y == nullptr) return ge::GRAPH_FAILED;
    *y = *x;
    return ge::GRAPH_SUCCESS;
}

static ge::graphStatus InferDataTypeQuantize(gert::InferDataTypeContext *context)
{
    auto *attrs = context->GetAttrs();
    const char *dtype = attrs ? attrs->GetStr(0) : nullptr;
    if (dtype == nullptr) return ge::GRAPH_FAILED;
    struct { const char *name; ge::DataType dt; } table[] = {
        {"torch.qint8", ge::DT_INT8}, {"torch.int8", ge::DT_INT8}, {"torch.quint8", ge::DT_UINT8},
        {"torch.uint8", ge::DT_UINT8}, {"torch.qint32", ge::DT_INT32}, {"torch.int32", ge::DT_INT32}};
    for (const auto &e : table) {
        if (std::strcmp(dtype, e.name) == 0) {
            context->SetOutputDataType(0, e.dt);
            return ge::GRAPH_SUCCESS;
        }
    }
    return ge::GRAPH_FAILED;
}

IMPL_OP_INFERSHAPE(Quantize).InferShape(InferShapeQuantize).InferDataType(InferDataTypeQuantize);
}  // namespace ops
