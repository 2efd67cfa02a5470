// CANN tiling callback of AddRmsNormQuant: calls the plain TilingAddRmsNormQuant
// (add_rms_norm_quant_tiling.h). Attributes: axis (0), epsilon (1), div_mode (2), dst_type (3):
// int8, or (Ascend 950) float8_e5m2 / float8_e4m3fn / hifloat8, the kernel's outType; axis
// other than -1 and other outputs are rejected.
#include "../../common/tiling_host_common.h"
#include "add_rms_norm_quant_tiling.h"

namespace optiling {
static ge::graphStatus TilingAddRmsNormQuantCallback(gert::TilingContext *context)
{
    opsdk_ascendc::InputRows r = opsdk_ascendc::RowsByInput(context, 0, 2);  // x1 over gamma
    if (!r.ok) return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    if (attrs == nullptr) return ge::GRAPH_FAILED;
    const int64_t *axis = attrs->GetAttrPointer<int64_t>(0);
    const bool *divMode = attrs->GetAttrPointer<bool>(2);
    const int64_t *dstType = attrs->GetAttrPointer<int64_t>(3);
    uint32_t outType = dstType != nullptr ? opsdk_ascendc::DstTypeToOutType(*dstType) : opsdk_ascendc::OUT_INT8;
    if (outType > opsdk_ascendc::OUT_HIFLOAT8) return ge::GRAPH_FAILED;
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    AddRmsNormQuantTilingData td = TilingAddRmsNormQuant(
        r.rows, r.cols, r.xSize, opsdk_ascendc::EpsilonAttr(context, 1),
        context->GetOptionalInputShape(4) != nullptr, context->GetOptionalInputShape(5) != nullptr,
        context->GetOptionalInputShape(6) != nullptr, context->GetOptionalInputShape(7) != nullptr,
        divMode == nullptr || *divMode, axis ? *axis : -1, facts.coreNum, facts.ubSize, outType);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(AddRmsNormQuant)
    .Tiling(TilingAddRmsNormQuantCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
