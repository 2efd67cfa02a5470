// Tiling of SiluMulQuant (the plugin example's my_ops::silu_mul_quant, examples/
// plugin_fused_op.py): h = silu(gate) * up (fp32), scale = max|h| / 127,
// y = rint(h * ((1 / max|h|) * 127)) saturated to int8 (all-zero row: scale 0, y 0), per row of
// numCols elements (the last dim).
#pragma once

#include <cstdint>

#include "../../common/tiling_common.h"

struct SiluMulQuantTilingData {
    uint64_t numRows;
    uint32_t numCols;
    uint32_t blockDim;
    uint64_t rowsPerBlock;
    uint32_t formerBlocks;
    uint32_t tilingKey;     // TILING_KEY_WHOLE_ROW or TILING_KEY_SPLIT_ROW (0: no tiling fits)
    uint32_t rowsPerLoop;
    uint32_t chunkCols;     // a multiple of 64
    uint32_t numChunks;
    uint32_t lastChunkCols;
};

#ifndef __CCE_AICORE__
// xSize: element bytes of gate and up (2).
inline SiluMulQuantTilingData TilingSiluMulQuant(uint64_t numRows, uint32_t numCols, uint32_t xSize, uint32_t coreNum,
                                                 uint32_t ubSize)
{
    using namespace opsdk_ascendc;
    SiluMulQuantTilingData t{};
    BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
    if (numCols == 0) return t;
    auto fixed = [&](uint64_t n) {  // h, tmp, |h| / int32 in fp32, half tmp, work, scalar
        return 3 * AlignElems(n, 4) * 4 + AlignElems(n, 2) * 2 + ReduceWorkBytes(n) + BLOCK_BYTES;
    };
    auto whole = [&](uint64_t rows) {  // gate, up in; y out (double-buffered); scale out
        return fixed(numCols) + 2 * 2 * rows * AlignElems(numCols, xSize) * xSize + 2 * rows * AlignBytes(numCols) +
               2 * AlignBytes(rows * 4);
    };
    uint64_t maxRows = s.rowsPerBlock + (s.formerBlocks ? 1 : 0);
    uint32_t rows = FitRows(ubSize, maxRows, whole);
    if (rows >= 1) {
        t.tilingKey = TILING_KEY_WHOLE_ROW;
        t.rowsPerLoop = rows;
        return t;
    }
    auto split = [&](uint64_t n) { return fixed(n) + 2 * 2 * n * xSize + 2 * n + 2 * BLOCK_BYTES; };
    uint32_t chunk = FitChunk(ubSize, numCols, 64, split);
    if (chunk == 0) return t;
    t.tilingKey = TILING_KEY_SPLIT_ROW;
    t.chunkCols = chunk;
    t.numChunks = static_cast<uint32_t>(CeilDiv(numCols, chunk));
    t.lastChunkCols = numCols - (t.numChunks - 1) * chunk;
    return t;
}
#endif
