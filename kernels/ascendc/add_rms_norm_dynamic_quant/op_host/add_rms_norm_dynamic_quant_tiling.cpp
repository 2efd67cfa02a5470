// CANN tiling callback of AddRmsNormDynamicQuant: calls the plain TilingAddRmsNormDynamicQuant
// (add_rms_norm_dynamic_quant_tiling.h). Outputs other than int8 and int4 are rejected.
#include "../../common/tiling_host_common.h"
#include "add_rms_norm_dynamic_quant_tiling.h"

namespace optiling {
static ge::graphStatus TilingAddRmsNormDynamicQuantCallback(gert::TilingContext *context)
{
    opsdk_ascendc::InputRows r = opsdk_ascendc::RowsByInput(context, 0, 2);  // x1 over gamma
    if (!r.ok) return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    if (attrs == nullptr) return ge::GRAPH_FAILED;
    const auto *mask = attrs->GetAttrPointer<gert::TypedContinuousVector<bool>>(1);
    bool hasMask = mask != nullptr && mask->GetSize() == 2;
    if (mask != nullptr && mask->GetSize() != 0 && !hasMask) return ge::GRAPH_FAILED;
    const int64_t *dstType = attrs->GetAttrPointer<int64_t>(2);
    int64_t dst = dstType ? *dstType : ge::DT_INT8;
    uint32_t outType = dst == ge::DT_INT4 ? opsdk_ascendc::OUT_INT8 : opsdk_ascendc::DstTypeToOutType(dst);
    if (outType > opsdk_ascendc::OUT_HIFLOAT8) return ge::GRAPH_FAILED;
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    AddRmsNormDynamicQuantTilingData td = TilingAddRmsNormDynamicQuant(
        r.rows, r.cols, r.xSize, opsdk_ascendc::EpsilonAttr(context, 0),
        context->GetOptionalInputShape(3) != nullptr, context->GetOptionalInputShape(4) != nullptr,
        context->GetOptionalInputShape(5) != nullptr, hasMask, hasMask && mask->GetData()[0],
        hasMask && mask->GetData()[1], dst == ge::DT_INT4, facts.coreNum, facts.ubSize, outType);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(AddRmsNormDynamicQuant)
    .Tiling(TilingAddRmsNormDynamicQuantCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
