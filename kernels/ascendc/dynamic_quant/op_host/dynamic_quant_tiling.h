// Tiling of DynamicQuant (npu_dynamic_quant), per-token int8:
// s = x * smooth_scales (fp32), scale = max|s| / 127, y = rint(s * (127 / max|s|)) saturated;
// an all-zero row gives scale 0 and y 0. numRows rows of numCols elements.
#pragma once

#include <cstdint>

#include "../../common/tiling_common.h"

struct DynamicQuantTilingData {
    uint64_t numRows;
    uint32_t numCols;
    uint32_t blockDim;
    uint64_t rowsPerBlock;
    uint32_t formerBlocks;
    uint32_t tilingKey;     // TILING_KEY_WHOLE_ROW or TILING_KEY_SPLIT_ROW (0: not supported / no fit)
    uint32_t rowsPerLoop;
    uint32_t chunkCols;     // a multiple of 64
    uint32_t numChunks;
    uint32_t lastChunkCols;
    uint32_t hasSmooth;
    uint32_t reserved;
};

#ifndef __CCE_AICORE__
// xSize: element bytes of x and smooth_scales (2). hasGroupIndex: MoE groups are not
// implemented by this kernel (tilingKey 0).
inline DynamicQuantTilingData TilingDynamicQuant(uint64_t numRows, uint32_t numCols, uint32_t xSize, bool hasSmooth,
                                                 bool hasGroupIndex, uint32_t coreNum, uint32_t ubSize)
{
    using namespace opsdk_ascendc;
    DynamicQuantTilingData t{};
    BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
    t.hasSmooth = hasSmooth ? 1 : 0;
    if (numCols == 0 || hasGroupIndex) return t;
    auto fixed = [&](uint64_t n) {  // smooth (raw, fp32), x / |x| in fp32, half tmp, work, scalar
        return (hasSmooth ? AlignElems(n, xSize) * xSize + AlignElems(n, 4) * 4 : 0) + 2 * AlignElems(n, 4) * 4 +
               AlignElems(n, 2) * 2 + ReduceWorkBytes(n) + BLOCK_BYTES;
    };
    auto whole = [&](uint64_t rows) {  // x in, y out (double-buffered), scale out
        return fixed(numCols) + 2 * rows * AlignElems(numCols, xSize) * xSize + 2 * rows * AlignBytes(numCols) +
               2 * AlignBytes(rows * 4);
    };
    uint64_t maxRows = s.rowsPerBlock + (s.formerBlocks ? 1 : 0);
    uint32_t rows = FitRows(ubSize, maxRows, whole);
    if (rows >= 1) {
        t.tilingKey = TILING_KEY_WHOLE_ROW;
        t.rowsPerLoop = rows;
        return t;
    }
    auto split = [&](uint64_t n) { return fixed(n) + 2 * n * xSize + 2 * n + 2 * BLOCK_BYTES; };
    uint32_t chunk = FitChunk(ubSize, numCols, 64, split);
    if (chunk == 0) return t;
    t.tilingKey = TILING_KEY_SPLIT_ROW;
    t.chunkCols = chunk;
    t.numChunks = static_cast<uint32_t>(CeilDiv(numCols, chunk));
    t.lastChunkCols = numCols - (t.numChunks - 1) * chunk;
    return t;
}
#endif
