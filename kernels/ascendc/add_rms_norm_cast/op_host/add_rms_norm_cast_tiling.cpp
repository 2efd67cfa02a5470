// CANN tiling callback of AddRmsNormCast: calls the plain TilingAddRmsNormCast
// (add_rms_norm_cast_tiling.h).
#include "../../common/tiling_host_common.h"
#include "add_rms_norm_cast_tiling.h"

namespace optiling {
static ge::graphStatus TilingAddRmsNormCastCallback(gert::TilingContext *context)
{
    opsdk_ascendc::InputRows r = opsdk_ascendc::RowsByInput(context, 0, 2);  // x1 over gamma
    if (!r.ok) return ge::GRAPH_FAILED;
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    AddRmsNormCastTilingData td = TilingAddRmsNormCast(r.rows, r.cols, r.xSize,
                                                       opsdk_ascendc::EpsilonAttr(context, 0), facts.coreNum,
                                                       facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(AddRmsNormCast)
    .Tiling(TilingAddRmsNormCastCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
