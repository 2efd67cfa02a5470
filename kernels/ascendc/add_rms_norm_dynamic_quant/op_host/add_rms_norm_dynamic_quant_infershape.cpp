// Shape / dtype inference of AddRmsNormDynamicQuant: x like x1; y1 / y2 like x1 in the dst_type
// attribute's dtype (int8 by default; int4) and
// scale1 / scale2 = x1's shape without the last dim, fp32, for the branches that run; a branch
// that does not run (output_mask, smooth scales: add_rms_norm_dynamic_quant_tiling.h) has
// (0,)-shaped outputs, as npu_add_rms_norm_dynamic_quant's contract returns them.
#include "register/op_impl_registry.h"
#include "add_rms_norm_dynamic_quant_tiling.h"

namespace ops {
static ge::graphStatus InferShapeAddRmsNormDynamicQuant(gert::InferShapeContext *context)
{
    const gert::Shape *x1 = context->GetInputShape(0);
    gert::Shape *y[2] = {context->GetOutputShape(0), context->GetOutputShape(1)};
    gert::Shape *x = context->GetOutputShape(2);
    gert::Shape *scale[2] = {context->GetOutputShape(3), context->GetOutputShape(4)};
    if (x1 == nullptr || x == nullptr || x1->GetDimNum() < 2) return ge::GRAPH_FAILED;
    for (int i = 0; i < 2; ++i)
        if (y[i] == nullptr || scale[i] == nullptr) return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    const auto *mask = attrs ? attrs->GetAttrPointer<gert::TypedContinuousVector<bool>>(1) : nullptr;
    bool hasMask = mask != nullptr && mask->GetSize() == 2;
    if (mask != nullptr && mask->GetSize() != 0 && !hasMask) return ge::GRAPH_FAILED;
    bool run[2] = {false, false};
    if (!AddRmsNormDynamicQuantBranches(hasMask, hasMask && mask->GetData()[0], hasMask && mask->GetData()[1],
                                        context->GetOptionalInputShape(3) != nullptr,
                                        context->GetOptionalInputShape(4) != nullptr, run[0], run[1]))
        return ge::GRAPH_FAILED;
    *x = *x1;
    for (int i = 0; i < 2; ++i) {
        if (!run[i]) {
            y[i]->SetDimNum(1);
            y[i]->SetDim(0, 0);
            scale[i]->SetDimNum(1);
            scale[i]->SetDim(0, 0);
            continue;
        }
        *y[i] = *x1;
        scale[i]->SetDimNum(x1->GetDimNum() - 1);
        for (size_t d = 0; d + 1 < x1->GetDimNum(); ++d) scale[i]->SetDim(d, x1->GetDim(d));
    }
    return ge::GRAPH_SUCCESS;
}

static ge::graphStatus InferDataTypeAddRmsNormDynamicQuant(gert::InferDataTypeContext *context)
{
    auto *attrs = context->GetAttrs();
    const int64_t *dstType = attrs ? attrs->GetAttrPointer<int64_t>(2) : nullptr;
    ge::DataType y = dstType ? static_cast<ge::DataType>(*dstType) : ge::DT_INT8;
    context->SetOutputDataType(0, y);
    context->SetOutputDataType(1, y);
    context->SetOutputDataType(2, context->GetInputDataType(0));
    context->SetOutputDataType(3, ge::DT_FLOAT);
    context->SetOutputDataType(4, ge::DT_FLOAT);
    return ge::GRAPH_SUCCESS;
}

IMPL_OP_INFERSHAPE(AddRmsNormDynamicQuant)
    .InferShape(InferShapeAddRmsNormDynamicQuant)
    .InferDataType(InferDataTypeAddRmsNormDynamicQuant);
}  // namespace ops
