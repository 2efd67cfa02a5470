// CANN tiling callback of AddRmsNormCast: calls the plain TilingAddRmsNormCast
// (add_rms_norm_cast_tiling.h).
#include "../../common/tiling_host_common.h"
#include "add_rms_norm_cast_tiling.h"

namespace optiling {
static ge::graphStatus TilingAddRmsNormCastCallback(gert::TilingContext *context)
{
    const gert::StorageShape *x1 = context->GetInputShape(0);
    const gert::StorageShape *gamma = context->GetInputShape(2);
    if (x1 == nullptr || gamma == nullptr) return ge::GRAPH_FAILED;
    uint64_t cols = static_cast<uint64_t>(gamma->GetStorageShape().GetShapeSize());
    uint64_t total = static_cast<uint64_t>(x1->GetStorageShape().GetShapeSize());
    if (cols == 0 || total % cols != 0) return ge::GRAPH_FAILED;
    uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    AddRmsNormCastTilingData td = TilingAddRmsNormCast(total / cols, static_cast<uint32_t>(cols), xSize,
                                                       opsdk_ascendc::EpsilonAttr(context, 0), facts.coreNum,
                                                       facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(AddRmsNormCast)
    .Tiling(TilingAddRmsNormCastCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
