// CANN tiling callback of Quantize: calls the plain TilingQuantize (quantize_tiling.h).
// Attributes: dtype (0, String: torch.qint8 / int8, torch.quint8 / uint8, torch.qint32 / int32;
// others are rejected), axis (1, Int, default 1). Scales along another dim than the last are
// applied per row.
#include <cstring>

#include "../../common/tiling_host_common.h"
#include "quantize_tiling.h"

namespace optiling {
static ge::graphStatus TilingQuantizeCallback(gert::TilingContext *context)
{
    const gert::StorageShape *x = context->GetInputShape(0);
    const gert::StorageShape *scales = context->GetInputShape(1);
    if (x == nullptr || scales == nullptr) return ge::GRAPH_FAILED;
    const gert::Shape &xs = x->GetStorageShape();
    int64_t rank = static_cast<int64_t>(xs.GetDimNum());
    uint64_t cols = rank > 0 ? static_cast<uint64_t>(xs.GetDim(rank - 1)) : 1;
    uint64_t total = static_cast<uint64_t>(xs.GetShapeSize());
    if (cols == 0) return ge::GRAPH_FAILED;
    auto *attrs = context->GetAttrs();
    if (attrs == nullptr) return ge::GRAPH_FAILED;
    const char *dtype = attrs->GetStr(0);
    const int64_t *axis = attrs->GetAttrPointer<int64_t>(1);
    if (dtype == nullptr) return ge::GRAPH_FAILED;
    uint32_t outType = QUANT_OUT_INT4 + 1;  // unsupported
    if (std::strcmp(dtype, "torch.qint8") == 0 || std::strcmp(dtype, "torch.int8") == 0) {
        outType = QUANT_OUT_INT8;
    } else if (std::strcmp(dtype, "torch.quint8") == 0 || std::strcmp(dtype, "torch.uint8") == 0) {
        outType = QUANT_OUT_UINT8;
    } else if (std::strcmp(dtype, "torch.qint32") == 0 || std::strcmp(dtype, "torch.int32") == 0) {
        outType = QUANT_OUT_INT32;
    }
    uint32_t xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    auto facts = opsdk_ascendc::GetPlatformFacts(context);
    int64_t ax = axis ? *axis : 1;
    opsdk_ascendc::AxisExtent ext = opsdk_ascendc::GetAxisExtent(xs, ax < 0 ? ax + rank : ax);
    QuantizeTilingData td = TilingQuantize(total / cols, static_cast<uint32_t>(cols), xSize,
                                           static_cast<uint64_t>(scales->GetStorageShape().GetShapeSize()),
                                           context->GetOptionalInputShape(2) != nullptr, rank, ax, ext.dim, ext.inner,
                                           outType, facts.coreNum, facts.ubSize);
    return opsdk_ascendc::CommitTiling(context, td);
}

IMPL_OP_OPTILING(Quantize)
    .Tiling(TilingQuantizeCallback)
    .TilingParse<opsdk_ascendc::EmptyCompileInfo>(opsdk_ascendc::TilingPrepareNothing);
}  // namespace optiling
