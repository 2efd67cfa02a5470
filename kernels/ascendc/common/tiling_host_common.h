// The CANN side of the tiling callbacks (op_host/*_tiling.cpp): the vector-core count and
// unified-buffer size of the SoC, and the copy of a plain tiling struct into the context.
// Needs the CANN toolkit (not compiled by the CPU tests).
#pragma once

#include <cstring>

#include "register/op_impl_registry.h"
#include "tiling/platform/platform_ascendc.h"

#include "tiling_common.h"

namespace opsdk_ascendc {

struct PlatformFacts {
    uint32_t coreNum;
    uint32_t ubSize;
};

inline PlatformFacts GetPlatformFacts(gert::TilingContext *context)
{
    auto plat = platform_ascendc::PlatformAscendC(context->GetPlatformInfo());
    uint64_t ub = 0;
    plat.GetCoreMemSize(platform_ascendc::CoreMemType::UB, ub);
    return {plat.GetCoreNumAiv(), static_cast<uint32_t>(ub)};
}

// Writes the tiling struct, block dim, tiling key and the (system-only) workspace.
template <typename TilingData>
inline ge::graphStatus CommitTiling(gert::TilingContext *context, const TilingData &td)
{
    if (td.tilingKey == 0) return ge::GRAPH_FAILED;  // no tiling fits / unsupported case
    auto *raw = context->GetRawTilingData();
    if (raw == nullptr || raw->GetCapacity() < sizeof(TilingData)) return ge::GRAPH_FAILED;
    std::memcpy(raw->GetData(), &td, sizeof(TilingData));
    raw->SetDataSize(sizeof(TilingData));
    context->SetBlockDim(td.blockDim);
    context->SetTilingKey(td.tilingKey);
    size_t *ws = context->GetWorkspaceSizes(1);
    if (ws == nullptr) return ge::GRAPH_FAILED;
    ws[0] = platform_ascendc::PlatformAscendC(context->GetPlatformInfo()).GetLibApiWorkSpaceSize();
    return ge::GRAPH_SUCCESS;
}

// The rows a tiling callback splits: input xIndex's elements in rows of `cols` elements,
// and the element bytes of input 0. ok is false when the input is absent or the rows do not
// fit the rule (the callback then fails).
struct InputRows {
    uint64_t rows = 0;
    uint32_t cols = 0;
    uint32_t xSize = 0;
    bool ok = false;
};

inline InputRows MakeInputRows(gert::TilingContext *context, uint64_t total, uint64_t cols)
{
    InputRows r;
    if (cols == 0 || total % cols != 0) return r;
    r.rows = total / cols;
    r.cols = static_cast<uint32_t>(cols);
    r.xSize = ge::GetSizeByDataType(context->GetInputDesc(0)->GetDataType());
    r.ok = true;
    return r;
}

// Rows of input xIndex as long as input colsIndex has elements (x over gamma's dims).
inline InputRows RowsByInput(gert::TilingContext *context, size_t xIndex, size_t colsIndex)
{
    const gert::StorageShape *x = context->GetInputShape(xIndex);
    const gert::StorageShape *c = context->GetInputShape(colsIndex);
    if (x == nullptr || c == nullptr) return {};
    return MakeInputRows(context, static_cast<uint64_t>(x->GetStorageShape().GetShapeSize()),
                         static_cast<uint64_t>(c->GetStorageShape().GetShapeSize()));
}

// Rows of input xIndex over its last dim; it needs at least minRank dims.
inline InputRows RowsByLastDim(gert::TilingContext *context, size_t xIndex, size_t minRank = 1)
{
    const gert::StorageShape *x = context->GetInputShape(xIndex);
    if (x == nullptr) return {};
    const gert::Shape &xs = x->GetStorageShape();
    if (xs.GetDimNum() < minRank || xs.GetDimNum() == 0) return {};
    return MakeInputRows(context, static_cast<uint64_t>(xs.GetShapeSize()),
                         static_cast<uint64_t>(xs.GetDim(xs.GetDimNum() - 1)));
}

inline float EpsilonAttr(gert::TilingContext *context, size_t index)
{
    auto *attrs = context->GetAttrs();
    const float *eps = attrs ? attrs->GetAttrPointer<float>(index) : nullptr;
    return eps ? *eps : 1e-6f;
}

// The size of dim ax of `shape` and the product of the dims between ax and the last (the
// per-row scale layout of the quantisation tilings); ax outside [0, rank - 1]: {0, 0}.
struct AxisExtent {
    uint64_t dim;
    uint64_t inner;
};
inline AxisExtent GetAxisExtent(const gert::Shape &shape, int64_t ax)
{
    int64_t rank = static_cast<int64_t>(shape.GetDimNum());
    if (ax < 0 || ax >= rank) return {0, 0};
    uint64_t inner = 1;
    for (int64_t i = ax + 1; i + 1 < rank; ++i) inner *= static_cast<uint64_t>(shape.GetDim(i));
    return {static_cast<uint64_t>(shape.GetDim(ax)), inner};
}

// A dst_type attribute (ge::DataType) as an OUT_* output code (tiling_common.h); any other
// type gives OUT_HIFLOAT8 + 1 (not supported).
inline uint32_t DstTypeToOutType(int64_t dst)
{
    if (dst == ge::DT_INT8) return OUT_INT8;
    if (dst == ge::DT_FLOAT8_E5M2) return OUT_FLOAT8_E5M2;
    if (dst == ge::DT_FLOAT8_E4M3FN) return OUT_FLOAT8_E4M3FN;
    if (dst == ge::DT_HIFLOAT8) return OUT_HIFLOAT8;
    return OUT_HIFLOAT8 + 1;
}

struct EmptyCompileInfo {};
inline ge::graphStatus TilingPrepareNothing(gert::TilingParseContext *) { return ge::GRAPH_SUCCESS; }

}  // namespace opsdk_ascendc
