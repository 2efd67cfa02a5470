// Plain C++ pieces shared by the tiling functions of the kernels under kernels/ascendc/:
// the split of rows over blocks and the search for the largest tile that fits the unified
// buffer. Used by the CANN tiling callbacks (op_host/*_tiling.cpp) and the CPU tests alike.
#pragma once

#include <cstdint>

namespace opsdk_ascendc {

constexpr uint32_t BLOCK_BYTES = 32;         // the unit of the unified buffer and of DataCopy
constexpr uint32_t REPEAT_BYTES = 256;       // one vector repeat
constexpr uint32_t MAX_BLOCK_COUNT = 4095;   // DataCopyExtParams::blockCount limit
constexpr uint32_t DEFAULT_UB_BYTES = 192 * 1024;  // ascend910b
constexpr uint32_t TILING_KEY_INVALID = 0;
constexpr uint32_t TILING_KEY_WHOLE_ROW = 1;  // rowsPerLoop whole rows per unified-buffer tile
constexpr uint32_t TILING_KEY_SPLIT_ROW = 2;  // one row at a time, in chunkCols chunks
// the output codes of the `outType` tiling fields of the quantising norms (y one byte each)
constexpr uint32_t OUT_INT8 = 0;
constexpr uint32_t OUT_FLOAT8_E5M2 = 1;
constexpr uint32_t OUT_FLOAT8_E4M3FN = 2;
constexpr uint32_t OUT_HIFLOAT8 = 3;
// the largest finite value of an 8-bit float output (0 for another code)
inline float Float8OutMax(uint32_t outType)
{
    return outType == OUT_FLOAT8_E5M2 ? 57344.0f
           : outType == OUT_FLOAT8_E4M3FN ? 448.0f
           : outType == OUT_HIFLOAT8 ? 32768.0f
                                        : 0.0f;
}

// The fields every row tiling starts with (SetRowSplit and ChooseRowTile fill them,
// common/row_kernel.h reads them), in this order:
//   numRows, numCols       the rows and their length (the last dim, or the norm's dims)
//   blockDim               the vector cores used
//   rowsPerBlock, formerBlocks   each block's rows: rowsPerBlock, one more for the first formerBlocks
//   tilingKey              TILING_KEY_WHOLE_ROW / TILING_KEY_SPLIT_ROW (a kernel's own keys), 0: none fits
//   rowsPerLoop            whole rows per unified-buffer tile
//   chunkCols, numChunks, lastChunkCols   a split row's chunks (chunkCols a multiple of the unit)
#define OPSDK_ROW_TILING_FIELDS \
    uint64_t numRows;           \
    uint32_t numCols;           \
    uint32_t blockDim;          \
    uint64_t rowsPerBlock;      \
    uint32_t formerBlocks;      \
    uint32_t tilingKey;         \
    uint32_t rowsPerLoop;       \
    uint32_t chunkCols;         \
    uint32_t numChunks;         \
    uint32_t lastChunkCols

#ifndef __CCE_AICORE__
inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return b == 0 ? 0 : (a + b - 1) / b; }
inline uint64_t AlignUp(uint64_t a, uint64_t b) { return CeilDiv(a, b) * b; }
// elements of `dsize` bytes, rounded up to whole 32-byte blocks
inline uint64_t AlignElems(uint64_t n, uint32_t dsize) { return AlignUp(n, BLOCK_BYTES / dsize); }
inline uint64_t AlignBytes(uint64_t bytes) { return AlignUp(bytes, BLOCK_BYTES); }
// the work buffer ReduceSum / ReduceMax need over n fp32 elements (bytes)
inline uint64_t ReduceWorkBytes(uint64_t n) { return AlignBytes(CeilDiv(n, REPEAT_BYTES / 4) * 4); }

struct BlockSplit {
    uint32_t blockDim;
    uint64_t rowsPerBlock;   // every block gets rowsPerBlock rows ...
    uint32_t formerBlocks;   // ... and the first formerBlocks blocks one more
};
inline BlockSplit SplitRows(uint64_t numRows, uint32_t coreNum)
{
    BlockSplit s{};
    if (coreNum == 0) coreNum = 1;
    s.blockDim = static_cast<uint32_t>(numRows == 0 ? 1 : (numRows < coreNum ? numRows : coreNum));
    s.rowsPerBlock = numRows / s.blockDim;
    s.formerBlocks = static_cast<uint32_t>(numRows % s.blockDim);
    return s;
}

// A tiling's row split (its fields numRows, numCols, blockDim, rowsPerBlock, formerBlocks) for
// numRows rows of numCols elements over coreNum cores; returns the split.
template <typename T>
inline BlockSplit SetRowSplit(T &t, uint64_t numRows, uint32_t numCols, uint32_t coreNum)
{
    BlockSplit s = SplitRows(numRows, coreNum);
    t.numRows = numRows;
    t.numCols = numCols;
    t.blockDim = s.blockDim;
    t.rowsPerBlock = s.rowsPerBlock;
    t.formerBlocks = s.formerBlocks;
    return s;
}

// The largest number of rows (<= maxRows, <= MAX_BLOCK_COUNT) whose buffers, as bytesFor(rows)
// counts them, fit ubSize; 0 when not even one row fits.
template <typename F>
inline uint32_t FitRows(uint64_t ubSize, uint64_t maxRows, F bytesFor)
{
    uint64_t hi = maxRows < MAX_BLOCK_COUNT ? maxRows : MAX_BLOCK_COUNT;
    if (hi == 0) hi = 1;
    uint64_t lo = 0;
    while (lo < hi) {  // bytesFor is increasing in rows
        uint64_t mid = (lo + hi + 1) / 2;
        if (bytesFor(mid) <= ubSize) lo = mid; else hi = mid - 1;
    }
    return static_cast<uint32_t>(lo);
}

// The largest chunk (a multiple of `unit` elements, <= maxCols rounded up to unit) whose
// buffers fit; 0 when not even one unit fits.
template <typename F>
inline uint32_t FitChunk(uint64_t ubSize, uint64_t maxCols, uint32_t unit, F bytesFor)
{
    uint64_t hi = CeilDiv(maxCols, unit), lo = 0;
    while (lo < hi) {
        uint64_t mid = (lo + hi + 1) / 2;
        if (bytesFor(mid * unit) <= ubSize) lo = mid; else hi = mid - 1;
    }
    return static_cast<uint32_t>(lo * unit);
}

// The most rows one block has (the tiles of key 1 never need more).
inline uint64_t MaxBlockRows(const BlockSplit &s) { return s.rowsPerBlock + (s.formerBlocks ? 1 : 0); }

// A tiling's chunk fields for rows of numCols elements in chunks of `chunk` (the last one shorter).
template <typename T>
inline void SetChunks(T &t, uint64_t numCols, uint64_t chunk)
{
    t.chunkCols = static_cast<uint32_t>(chunk);
    t.numChunks = static_cast<uint32_t>(CeilDiv(numCols, chunk));
    t.lastChunkCols = static_cast<uint32_t>(numCols - (t.numChunks - 1) * chunk);
}

// The tile choice every row tiling ends with (t.numCols set): whole rows when at least one fits
// (key wholeKey, the most that fit, at most maxRows), else one row at a time in the largest
// chunks, a multiple of `unit` elements, that fit (key splitKey), else key 0: nothing fits.
// wholeBytes(rows) / splitBytes(cols): the unified-buffer bytes of such a tile.
template <typename T, typename W, typename S>
inline void ChooseRowTile(T &t, uint64_t ubSize, uint64_t maxRows, W wholeBytes, S splitBytes, uint32_t unit = 64,
                          uint32_t wholeKey = TILING_KEY_WHOLE_ROW, uint32_t splitKey = TILING_KEY_SPLIT_ROW)
{
    uint32_t rows = FitRows(ubSize, maxRows, wholeBytes);
    if (rows >= 1) {
        t.tilingKey = wholeKey;
        t.rowsPerLoop = rows;
        return;
    }
    uint32_t chunk = FitChunk(ubSize, t.numCols, unit, splitBytes);
    if (chunk == 0) return;
    t.tilingKey = splitKey;
    SetChunks(t, t.numCols, chunk);
}
#endif

}  // namespace opsdk_ascendc
