// Tiling of DynamicQuant / DynamicQuantV2 (npu_dynamic_quant), symmetric, int8 or int4 (or, on
// Ascend 950, float8_e5m2 / float8_e4m3fn / hifloat8: scale = amax * (1 / DTYPE_MAX),
// y = cast(s / scale), saturating; scale 0 gives y 0):
// s = x * smooth_scales (fp32), amax = max|s| over a token (row), the whole tensor or a
// channel (a column of the last two dims), scale = amax / DMAX, y = rint(s * (DMAX / amax))
// saturated (DMAX 127 for int8, 7 for int4); amax = 0 gives scale 0 and y 0. numRows rows of
// numCols elements. Kernel body: common/dynamic_quant_base.h.
#pragma once

#include <cstdint>

#include "../../common/tiling_common.h"

// quant_mode
constexpr uint32_t DQ_MODE_PER_TOKEN = 0;
constexpr uint32_t DQ_MODE_PER_TENSOR = 1;
constexpr uint32_t DQ_MODE_PER_CHANNEL = 2;

// tiling keys (0: not supported / no fit)
constexpr uint32_t DQ_KEY_TOKEN_WHOLE = 1;   // per token, rowsPerLoop whole rows per tile
constexpr uint32_t DQ_KEY_TOKEN_SPLIT = 2;   // per token, a row in chunks (pass 1 amax, pass 2 quantise)
constexpr uint32_t DQ_KEY_TENSOR_WHOLE = 3;  // per tensor: every block finds the tensor's amax, then
constexpr uint32_t DQ_KEY_TENSOR_SPLIT = 4;  //   quantises its rows (whole rows / a row in chunks)
constexpr uint32_t DQ_KEY_CHANNEL = 5;       // per channel: units of (batch, column chunk) over the blocks

constexpr uint32_t DQ_MAX_GROUPS = 1024;     // MoE experts (group_index's length)

struct DynamicQuantTilingData {
    // tilingKey: DQ_KEY_*; per channel, rowsPerBlock / formerBlocks count units (one batch's
    // column chunk) and rowsPerLoop rows of dim -2 per tile
    OPSDK_ROW_TILING_FIELDS;
    uint32_t hasSmooth;
    uint32_t numGroups;     // MoE: group_index's length E (smooth_scales (E, numCols)); 0: no group_index
    uint32_t chanRows;      // per channel: the size M of dim -2 (numRows = batches * M)
    uint32_t int4Out;       // y packed int4 (two per byte, element 0 in the low nibble) instead of int8
    uint32_t outType;       // OUT_INT8 (int8 / int4 by int4Out) or an 8-bit float output (tiling_common.h)
    float float8Max;        // 8-bit float outputs: DTYPE_MAX (scale = amax * (1 / DTYPE_MAX), y = s / scale)
};

#ifndef __CCE_AICORE__
// DTYPE_MAX of an 8-bit float output: the format's largest finite value; for hifloat8 the
// dst_type_max attribute when |dst_type_max| >= 1e-6 (DynamicQuantV2), else 32768.
inline float DynamicQuantFloat8Max(uint32_t outType, float dstTypeMax)
{
    using namespace opsdk_ascendc;
    if (outType == OUT_HIFLOAT8 && (dstTypeMax >= 1e-6f || dstTypeMax <= -1e-6f)) return dstTypeMax;
    return Float8OutMax(outType);
}
#endif

#ifndef __CCE_AICORE__
// xSize: element bytes of x and smooth_scales (2). numGroups: group_index's length (0: none;
// per token only, smooth_scales required, at most DQ_MAX_GROUPS). quantMode: DQ_MODE_*.
// chanRows: the size of dim -2 (used per channel; smooth_scales then has chanRows elements).
// int4Out: int4 output (numCols a multiple of 8). outType: OUT_INT8 (int8 / int4) or an 8-bit
// float output (Ascend 950) with DTYPE_MAX float8Max (DynamicQuantFloat8Max); not with int4Out.
inline DynamicQuantTilingData TilingDynamicQuant(uint64_t numRows, uint32_t numCols, uint32_t xSize, bool hasSmooth,
                                                 uint32_t numGroups, uint32_t quantMode, uint64_t chanRows,
                                                 bool int4Out, uint32_t coreNum, uint32_t ubSize,
                                                 uint32_t outType = 0, float float8Max = 0.0f)
{
    using namespace opsdk_ascendc;
    DynamicQuantTilingData t{};
    BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
    t.hasSmooth = hasSmooth ? 1 : 0;
    t.numGroups = numGroups;
    t.int4Out = int4Out ? 1 : 0;
    t.outType = outType;
    t.float8Max = float8Max;
    if (numCols == 0 || quantMode > DQ_MODE_PER_CHANNEL || (int4Out && numCols % 8 != 0)) return t;
    if (outType > OUT_HIFLOAT8 || (outType != OUT_INT8 && (int4Out || !(float8Max > 0.0f)))) return t;
    if (numGroups > 0 && (!hasSmooth || quantMode != DQ_MODE_PER_TOKEN || numGroups > DQ_MAX_GROUPS)) return t;
    // bytes of y per n elements
    auto yBytes = [&](uint64_t n) { return AlignBytes(int4Out ? n / 2 : n); };
    if (quantMode == DQ_MODE_PER_CHANNEL) {
        if (chanRows == 0 || numRows % chanRows != 0 || chanRows > 0xFFFFFFFFull) return t;
        uint64_t batches = numRows / chanRows;
        // column max, inverse, DMAX, x in fp32, |x| / int32 step (fp32 each), scale out
        // (double-buffered), offset zeros, half step, scalar
        auto fixed = [&](uint64_t n) { return 8 * AlignElems(n, 4) * 4 + AlignElems(n, 2) * 2 + BLOCK_BYTES; };
        auto bytes = [&](uint64_t n, uint64_t rows) {  // + x in, y out (double-buffered), smooth (raw, fp32) per row
            return fixed(n) + 2 * rows * AlignElems(n, xSize) * xSize + 2 * rows * yBytes(n) +
                   (hasSmooth ? AlignElems(rows, xSize) * xSize + AlignElems(rows, 4) * 4 : 0);
        };
        // enough units for the cores: split the columns when there are fewer batches than cores
        uint64_t colSplits = CeilDiv(coreNum == 0 ? 1 : coreNum, batches);
        uint64_t cc = colSplits <= 1 ? numCols : AlignUp(CeilDiv(numCols, colSplits), 64);
        if (cc >= numCols) cc = numCols;
        if (bytes(cc, 1) > ubSize) {
            cc = FitChunk(ubSize, numCols, 64, [&](uint64_t n) { return bytes(n, 1); });
            if (cc == 0) return t;
        }
        t.tilingKey = DQ_KEY_CHANNEL;
        t.chanRows = static_cast<uint32_t>(chanRows);
        SetChunks(t, numCols, cc);
        t.rowsPerLoop = FitRows(ubSize, chanRows, [&](uint64_t rows) { return bytes(cc, rows); });
        BlockSplit u = SplitRows(batches * t.numChunks, coreNum);
        t.blockDim = u.blockDim;
        t.rowsPerBlock = u.rowsPerBlock;
        t.formerBlocks = u.formerBlocks;
        return t;
    }
    bool perTensor = quantMode == DQ_MODE_PER_TENSOR;
    // smooth (raw, fp32), x / |x| in fp32, half tmp, work, scalar
    auto fixed = [&](uint64_t n) {
        return (hasSmooth ? AlignElems(n, xSize) * xSize + AlignElems(n, 4) * 4 : 0) + 2 * AlignElems(n, 4) * 4 +
               AlignElems(n, 2) * 2 + ReduceWorkBytes(n) + BLOCK_BYTES;
    };
    auto whole = [&](uint64_t rows) {  // x in, y out (double-buffered), scale out (double-buffered), offset zeros
        return fixed(numCols) + 2 * rows * AlignElems(numCols, xSize) * xSize + 2 * rows * yBytes(numCols) +
               3 * AlignBytes(rows * 4);
    };
    // per tensor: the amax pass reads every row of the tensor, tiles as large as for the block's rows
    uint64_t maxRows = perTensor ? numRows : MaxBlockRows(s);
    auto split = [&](uint64_t n) { return fixed(n) + 2 * n * xSize + 2 * yBytes(n) + 3 * BLOCK_BYTES; };
    ChooseRowTile(t, ubSize, maxRows, whole, split, 64, perTensor ? DQ_KEY_TENSOR_WHOLE : DQ_KEY_TOKEN_WHOLE,
                  perTensor ? DQ_KEY_TENSOR_SPLIT : DQ_KEY_TOKEN_SPLIT);
    return t;
}
#endif
