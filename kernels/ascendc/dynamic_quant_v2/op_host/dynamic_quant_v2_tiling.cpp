// CANN tiling callback of DynamicQuantV2: calls the plain TilingDynamicQuantV2
// (dynamic_quant_v2_tiling.h). Attributes: dst_type (0; int8 or int4, or on Ascend 950 float8_e5m2
// / float8_e4m3fn / hifloat8), is_symmetrical (1),
// quant_mode (2: "pertoken", "pertensor", "perchannel"), dst_type_max (3).
#include <cstring>

#include "../../common/tiling_host_common.h"
#include "dynamic_quant_v2_tiling.h"

namespace optiling {
static ge::graphStatus TilingDynamicQuantV2Callback(gert::TilingContext *context)
{
    const gert::StorageShape *x = context->GetInputShape(0);
    if (x == nullptr) return ge::GRAPH_FAILED;
    const gert::Shape &xs = x->GetStorageShape();
    size_t rank = xs.GetDimNum();
    if (rank < 2) return ge::GRAPH_FAILED;
    uint64_t cols = static_cast<uint64_t>(xs.GetDim(rank - 1));
    uint64_t total = static_cast<uint64_t>(xs.GetShapeSize());
    if (cols == 0) return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    if (attrs == nullptr) return ge::GRAPH_FAILED;
    const int64_t *dstType = attrs->GetAttrPointer<int64_t>(0);
    const bool *symmetrical = attrs->GetAttrPointer<bool>(1);
    const char *mode = attrs->GetStr(2);
    const float *dstTypeMax = attrs->GetAttrPointer<float>(3);
    int64_t dst = dstType ? *dstType : ge::DT_INT8;
    uint32_t outType = opsdk_ascendc::DstTypeToOutType(dst);
    if (dst != ge::DT_INT4 && outType > opsdk_ascendc::OUT_HIFLOAT8) return ge::GRAPH_FAILED;
    uint32_t quantMode;
    if (mode == nullptr || std::strcmp(mode, "pertoken") == 0) {
        quantMode = DQ_MODE_PER_TOKEN;
    } else if (std::strcmp(mode, "pertensor") == 0) {
        quantMode = DQ_MODE_PER_TENSOR;
    } else if (std::strcmp(mode, "perchannel") == 0) {
        quantMode = DQ_MODE_PER_CHANNEL;
    } else {
        return ge::GRAPH_FAILED;
    }
    bool hasSmooth = context->GetOptionalInputShape(1) != nullptr;
    const gert::StorageShape *group = context->GetOptionalInputShape(2);
    uint64_t numGroups = group ? static_cast<uint64_t>(group->GetStorageShape().GetShapeSize()) : 0;
    if (group != nullptr && numGroups == 0) return ge::GRAPH_FAILED;
    uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    DynamicQuantV2TilingData td = TilingDynamicQuantV2(
        total / cols, static_cast<uint32_t>(cols), xSize, hasSmooth,
        static_cast<uint32_t>(numGroups > 0xFFFFFFFFull ? 0xFFFFFFFFull : numGroups), quantMode,
        static_cast<uint64_t>(xs.GetDim(rank - 2)), dst == ge::DT_INT4, symmetrical != nullptr && *symmetrical,
        dstTypeMax ? *dstTypeMax : 0.0f, facts.coreNum, facts.ubSize, dst == ge::DT_INT4 ? 0 : outType);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(DynamicQuantV2)
    .Tiling(TilingDynamicQuantV2Callback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
