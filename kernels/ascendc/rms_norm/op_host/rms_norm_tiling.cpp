// CANN tiling callback of RmsNorm: reads shapes, dtypes, epsilon and the SoC's facts, calls
// the plain TilingRmsNorm (rms_norm_tiling.h) and commits the struct.
#include "../../common/tiling_host_common.h"
#include "rms_norm_tiling.h"

namespace optiling {
static ge::graphStatus TilingRmsNormCallback(gert::TilingContext *context)
{
    const gert::StorageShape *x = context->GetInputShape(0);
    const gert::StorageShape *gamma = context->GetInputShape(1);
    if (x == nullptr || gamma == nullptr) return ge::GRAPH_FAILED;
    uint64_t cols = static_cast<uint64_t>(gamma->GetStorageShape().GetShapeSize());
    uint64_t total = static_cast<uint64_t>(x->GetStorageShape().GetShapeSize());
    if (cols == 0 || total % cols != 0) return ge::GRAPH_FAILED;
    uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    uint32_t gSize = ge::GetSizeByDataType(context->GetInputDesc(1)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    RmsNormTilingData td = TilingRmsNorm(total / cols, static_cast<uint32_t>(cols), xSize, gSize,
                                         opsdk_ascendc::EpsilonAttr(context, 0), facts.coreNum, facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(RmsNorm)
    .Tiling(TilingRmsNormCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
