// CANN tiling callback of AscendQuantV2: calls the plain TilingAscendQuantV2
// (ascend_quant_v2_tiling.h). Attributes: sqrt_mode (0), round_mode (1), dst_type (2), axis (3).
// round_mode: "round" (rint), "floor", "ceil", "trunc"; others, outputs other than int8 / int4
// and per-channel scales along another dim than the last two are rejected.
#include <cstring>

#include "../../common/tiling_host_common.h"
#include "ascend_quant_v2_tiling.h"

namespace optiling {
static ge::graphStatus TilingAscendQuantV2Callback(gert::TilingContext *context)
{
    const gert::StorageShape *x = context->GetInputShape(0);
    const gert::StorageShape *scale = context->GetInputShape(1);
    if (x == nullptr || scale == nullptr) return ge::GRAPH_FAILED;
    const gert::Shape &xs = x->GetStorageShape();
    int64_t rank = static_cast<int64_t>(xs.GetDimNum());
    uint64_t cols = rank > 0 ? static_cast<uint64_t>(xs.GetDim(rank - 1)) : 1;
    uint64_t total = static_cast<uint64_t>(xs.GetShapeSize());
    if (cols == 0) return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    if (attrs == nullptr) return ge::GRAPH_FAILED;
    const bool *sqrtMode = attrs->GetAttrPointer<bool>(0);
    const char *roundMode = attrs->GetStr(1);
    const int64_t *dstType = attrs->GetAttrPointer<int64_t>(2);
    const int64_t *axis = attrs->GetAttrPointer<int64_t>(3);
    uint32_t mode = QUANT_ROUND_TRUNC + 1;  // unsupported
    if (roundMode == nullptr || std::strcmp(roundMode, "round") == 0) {
        mode = QUANT_ROUND_RINT;
    } else if (std::strcmp(roundMode, "floor") == 0) {
        mode = QUANT_ROUND_FLOOR;
    } else if (std::strcmp(roundMode, "ceil") == 0) {
        mode = QUANT_ROUND_CEIL;
    } else if (std::strcmp(roundMode, "trunc") == 0) {
        mode = QUANT_ROUND_TRUNC;
    }
    int64_t ax = axis ? *axis : -1;
    int64_t dst = dstType ? *dstType : ge::DT_INT8;
    opsdk_ascendc::AxisExtent ext = opsdk_ascendc::GetAxisExtent(xs, ax < 0 ? ax + rank : ax);
    uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    AscendQuantV2TilingData td = TilingAscendQuantV2(
        total / cols, static_cast<uint32_t>(cols), xSize, static_cast<uint64_t>(scale->GetStorageShape().GetShapeSize()),
        context->GetOptionalInputShape(2) != nullptr, rank, ax, ext.dim, ext.inner, sqrtMode != nullptr && *sqrtMode,
        mode, dst == ge::DT_INT8 ? QUANT_OUT_INT8 : dst == ge::DT_INT4 ? QUANT_OUT_INT4 : QUANT_OUT_INT4 + 1,
        facts.coreNum, facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(AscendQuantV2)
    .Tiling(TilingAscendQuantV2Callback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
