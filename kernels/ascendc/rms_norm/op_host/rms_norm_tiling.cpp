// CANN tiling callback of RmsNorm: reads shapes, dtypes, epsilon and the SoC's facts, calls
// the plain TilingRmsNorm (rms_norm_tiling.h) and commits the struct.
#include "../../common/tiling_host_common.h"
#include "rms_norm_tiling.h"

namespace optiling {
static ge::graphStatus TilingRmsNormCallback(gert::TilingContext *context)
{
    opsdk_ascendc::InputRows r = opsdk_ascendc::RowsByInput(context, 0, 1);  // x over gamma
    if (!r.ok) return ge::GRAPH_FAILED;
    uint32_t gSize = ge::GetSizeByDataType(context->GetInputDesc(1)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    RmsNormTilingData td = TilingRmsNorm(r.rows, r.cols, r.xSize, gSize,
                                         opsdk_ascendc::EpsilonAttr(context, 0), facts.coreNum, facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(RmsNorm)
    .Tiling(TilingRmsNormCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
