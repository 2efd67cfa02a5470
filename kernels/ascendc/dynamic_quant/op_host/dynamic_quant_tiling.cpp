// CANN tiling callback of DynamicQuant: calls the plain TilingDynamicQuant
// (dynamic_quant_tiling.h). group_index (MoE) and outputs other than int8 are rejected.
#include "../../common/tiling_host_common.h"
#include "dynamic_quant_tiling.h"

namespace optiling {
static ge::graphStatus TilingDynamicQuantCallback(gert::TilingContext *context)
{
    const gert::StorageShape *x = context->GetInputShape(0);
    if (x == nullptr) return ge::GRAPH_FAILED;
    const gert::Shape &xs = x->GetStorageShape();
    if (xs.GetDimNum() < 2) return ge::GRAPH_FAILED;
    uint64_t cols = static_cast<uint64_t>(xs.GetDim(xs.GetDimNum() - 1));
    uint64_t total = static_cast<uint64_t>(xs.GetShapeSize());
    if (cols == 0) return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    const int64_t *dstType = attrs ? attrs->GetAttrPointer<int64_t>(0) : nullptr;
    if (dstType != nullptr && *dstType != ge::DT_INT8) return ge::GRAPH_FAILED;
    bool hasSmooth = context->GetOptionalInputShape(1) != nullptr;
    bool hasGroup = context->GetOptionalInputShape(2) != nullptr;
    uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    DynamicQuantTilingData td = TilingDynamicQuant(total / cols, static_cast<uint32_t>(cols), xSize, hasSmooth, hasGroup,
                                                   facts.coreNum, facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(DynamicQuant)
    .Tiling(TilingDynamicQuantCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
