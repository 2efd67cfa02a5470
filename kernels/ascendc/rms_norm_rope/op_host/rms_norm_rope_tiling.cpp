// CANN tiling callback of RmsNormRope: reads x's and cos's shapes, the dtypes, epsilon and the
// SoC's facts, calls the plain TilingRmsNormRope (rms_norm_rope_tiling.h) and commits it.
#include "common/tiling_host_common.h"
#include "rms_norm_rope_tiling.h"

namespace optiling {
static ge::graphStatus TilingRmsNormRopeCallback(gert::TilingContext *context)
{
    const gert::StorageShape *x = context->GetInputShape(0);
    const gert::StorageShape *c = context->GetInputShape(2);
    if (x == nullptr || c == nullptr) return ge::GRAPH_FAILED;
    const gert::Shape &xs = x->GetStorageShape(), &cs = c->GetStorageShape();
    const size_t rank = xs.GetDimNum();
    if ((rank != 3 && rank != 4) || cs.GetDimNum() != rank) return ge::GRAPH_FAILED;
    int64_t xShape[4] = {}, cosShape[4] = {};
    for (size_t k = 0; k < rank; ++k) {
        xShape[k] = xs.GetDim(k);
        cosShape[k] = cs.GetDim(k);
    }
    uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    uint32_t gSize = ge::GetSizeByDataType(context->GetInputDesc(1)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    RmsNormRopeTilingData td = TilingRmsNormRope(xShape, cosShape, static_cast<uint32_t>(rank), xSize, gSize,
                                                 opsdk_ascendc::EpsilonAttr(context, 0), facts.coreNum, facts.ubSize);
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID && td.numRows != 0) return ge::GRAPH_FAILED;
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(RmsNormRope)
    .Tiling(TilingRmsNormRopeCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
