// CANN tiling callback of SiluMulQuant: calls the plain TilingSiluMulQuant
// (silu_mul_quant_tiling.h).
#include "common/tiling_host_common.h"
#include "silu_mul_quant_tiling.h"

namespace optiling {
static ge::graphStatus TilingSiluMulQuantCallback(gert::TilingContext *context)
{
    opsdk_ascendc::InputRows r = opsdk_ascendc::RowsByLastDim(context, 0);  // gate's rows
    if (!r.ok) return ge::GRAPH_FAILED;
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    SiluMulQuantTilingData td =
        TilingSiluMulQuant(r.rows, r.cols, r.xSize, facts.coreNum, facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(SiluMulQuant)
    .Tiling(TilingSiluMulQuantCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
