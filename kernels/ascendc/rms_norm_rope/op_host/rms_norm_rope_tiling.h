// Tiling of RmsNormRope (op_sdk::rms_norm_rope): per row of numCols = D elements (x's last
// dim, even), npu_rms_norm's y rounded to x's dtype, then the "half" rotation with that row's
// cos / sin. Rows are split over the vector cores; a tile holds rowsPerLoop whole rows (key 1;
// D is at most 1024, so no row needs splitting: key 2 is never chosen).
//
// The rows of x (3 or 4 dims) are indexed by its leading dims, padded in front to three:
// lead[0..2]; cos / sin (x's rank, each dim x's or 1, contiguous) give a row's cos row as
// sum(i_k * cosRowStride[k]), 0 where cos has 1. Both halves of a row are copied into their
// own 32-byte-aligned unified-buffer blocks (blockCount = 2 per row), so any even D works.
// The struct is the tiling data the kernel reads; TilingRmsNormRope is the plain C++
// function shared by the CANN tiling callback (rms_norm_rope_tiling.cpp) and the CPU tests.
#pragma once

#include <cstdint>

#include "common/tiling_common.h"

struct RmsNormRopeTilingData {
    OPSDK_ROW_TILING_FIELDS;  // common/tiling_common.h
    float epsilon;
    float avgFactor;          // 1 / numCols
    uint32_t lead[3];         // x's leading dims, padded in front with 1
    uint64_t cosRowStride[3]; // cos / sin rows per step of each leading dim (0: broadcast)
};

#ifndef __CCE_AICORE__
// xShape / cosShape: rank dims each (3 or 4), cos's dims x's or 1, the last the same even D;
// xSize / gammaSize: element bytes of x (and cos / sin, y) and gamma. A shape outside those
// rules gets tilingKey 0 (the host refuses it).
inline RmsNormRopeTilingData TilingRmsNormRope(const int64_t *xShape, const int64_t *cosShape, uint32_t rank,
                                               uint32_t xSize, uint32_t gammaSize, float epsilon, uint32_t coreNum,
                                               uint32_t ubSize)
{
    using namespace opsdk_ascendc;
    RmsNormRopeTilingData t{};
    if (rank != 3 && rank != 4) return t;
    const uint32_t lead = rank - 1;
    const int64_t d = xShape[rank - 1];
    if (d <= 0 || d % 2 != 0 || d > 1024 || cosShape[rank - 1] != d) return t;
    uint64_t numRows = 1;
    for (uint32_t k = 0; k < 3; ++k) t.lead[k] = 1;
    for (uint32_t k = 0; k < lead; ++k) {
        if (xShape[k] < 0 || (cosShape[k] != 1 && cosShape[k] != xShape[k])) return t;
        t.lead[3 - lead + k] = static_cast<uint32_t>(xShape[k]);
        numRows *= static_cast<uint64_t>(xShape[k]);
    }
    uint64_t step = 1;  // cos rows per step of dim k: the product of cos's later leading dims
    for (int32_t k = static_cast<int32_t>(lead) - 1; k >= 0; --k) {
        t.cosRowStride[3 - lead + k] = cosShape[k] == 1 ? 0 : step;
        step *= static_cast<uint64_t>(cosShape[k]);
    }
    const uint32_t numCols = static_cast<uint32_t>(d), half = numCols / 2;
    BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
    t.epsilon = epsilon;
    t.avgFactor = 1.0f / static_cast<float>(numCols);
    // a row in the UB: its two halves, each in whole 32-byte blocks
    const uint64_t rowT = 2 * AlignElems(half, xSize) * xSize;
    // resident: gamma (its halves in fp32, and their load buffer), fp32 work rows of a half
    // (x's two halves, cos / sin halves, two products), the reduction's work buffer, two scalars
    const uint64_t fixed = 2 * AlignElems(half, gammaSize) * gammaSize + 2 * AlignElems(half, 4) * 4 +
                           8 * AlignElems(half, 4) * 4 + ReduceWorkBytes(half) + 2 * BLOCK_BYTES;
    // per tile row, double-buffered: x in, cos and sin in, y out
    auto whole = [&](uint64_t rows) { return fixed + 2 * 4 * rows * rowT; };
    auto never = [&](uint64_t) { return ubSize + uint64_t(1); };
    // a tile's copies move 2 blocks per row (at most MAX_BLOCK_COUNT blocks)
    const uint64_t most = MaxBlockRows(s) < MAX_BLOCK_COUNT / 2 ? MaxBlockRows(s) : MAX_BLOCK_COUNT / 2;
    ChooseRowTile(t, ubSize, most, whole, never);
    return t;
}
#endif
