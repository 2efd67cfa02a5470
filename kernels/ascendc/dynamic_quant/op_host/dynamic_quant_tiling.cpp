// CANN tiling callback of DynamicQuant: calls the plain TilingDynamicQuant
// (dynamic_quant_tiling.h), per token. Attribute: dst_type (0; int8 or int4, or on Ascend 950
// float8_e5m2 / float8_e4m3fn / hifloat8; others rejected).
// group_index (MoE): its length is the number of groups.
#include "../../common/tiling_host_common.h"
#include "dynamic_quant_tiling.h"

namespace optiling {
static ge::graphStatus TilingDynamicQuantCallback(gert::TilingContext *context)
{
    opsdk_ascendc::InputRows r = opsdk_ascendc::RowsByLastDim(context, 0, 2);  // x's rows (2-D at least)
    if (!r.ok) return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    const int64_t *dstType = attrs ? attrs->GetAttrPointer<int64_t>(0) : nullptr;
    int64_t dst = dstType ? *dstType : ge::DT_INT8;
    uint32_t outType = opsdk_ascendc::DstTypeToOutType(dst);
    if (dst != ge::DT_INT4 && outType > opsdk_ascendc::OUT_HIFLOAT8) return ge::GRAPH_FAILED;
    bool hasSmooth = context->GetOptionalInputShape(1) != nullptr;
    const gert::StorageShape *group = context->GetOptionalInputShape(2);
    uint64_t numGroups = group ? static_cast<uint64_t>(group->GetStorageShape().GetShapeSize()) : 0;
    if (group != nullptr && numGroups == 0) return ge::GRAPH_FAILED;
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    DynamicQuantTilingData td = TilingDynamicQuant(r.rows, r.cols, r.xSize, hasSmooth,
                                                   static_cast<uint32_t>(numGroups > 0xFFFFFFFFull ? 0xFFFFFFFFull : numGroups),
                                                   DQ_MODE_PER_TOKEN, 0, dst == ge::DT_INT4, facts.coreNum, facts.ubSize,
                                                   dst == ge::DT_INT4 ? 0 : outType,
                                                   DynamicQuantFloat8Max(dst == ge::DT_INT4 ? 0 : outType, 0.0f));
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(DynamicQuant)
    .Tiling(TilingDynamicQuantCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
