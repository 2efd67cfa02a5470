// CANN tiling callback of SiluMulQuant: calls the plain TilingSiluMulQuant
// (silu_mul_quant_tiling.h).
#include "../../common/tiling_host_common.h"
#include "silu_mul_quant_tiling.h"

namespace optiling {
static ge::graphStatus TilingSiluMulQuantCallback(gert::TilingContext *context)
{
    const gert::StorageShape *gate = context->GetInputShape(0);
    if (gate == nullptr) return ge::GRAPH_FAILED;
    const gert::Shape &gs = gate->GetStorageShape();
    if (gs.GetDimNum() < 1) return ge::GRAPH_FAILED;
    uint64_t cols = static_cast<uint64_t>(gs.GetDim(gs.GetDimNum() - 1));
    uint64_t total = static_cast<uint64_t>(gs.GetShapeSize());
    if (cols == 0) return ge::GRAPH_FAILED;
    uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    SiluMulQuantTilingData td =
        TilingSiluMulQuant(total / cols, static_cast<uint32_t>(cols), xSize, facts.coreNum, facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(SiluMulQuant)
    .Tiling(TilingSiluMulQuantCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
