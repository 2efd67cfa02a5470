// Tiling of RmsNorm (npu_rms_norm): y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps),
// over the last numCols = numel(gamma) elements of each of numRows rows.
// The struct is the tiling data the kernel reads; TilingRmsNorm is the plain C++ function
// shared by the CANN tiling callback (rms_norm_tiling.cpp) and the CPU tests.
#pragma once

#include <cstdint>

#include "../../common/tiling_common.h"

struct RmsNormTilingData {
    OPSDK_ROW_TILING_FIELDS;
    float epsilon;
    float avgFactor;        // 1 / numCols
};

#ifndef __CCE_AICORE__
// xSize / gammaSize: element bytes of x (2 or 4) and gamma (2 or 4).
inline RmsNormTilingData TilingRmsNorm(uint64_t numRows, uint32_t numCols, uint32_t xSize, uint32_t gammaSize,
                                       float epsilon, uint32_t coreNum, uint32_t ubSize)
{
    using namespace opsdk_ascendc;
    RmsNormTilingData t{};
    BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
    t.epsilon = epsilon;
    t.avgFactor = numCols ? 1.0f / static_cast<float>(numCols) : 0.0f;
    if (numCols == 0) return t;  // tilingKey 0: nothing to do (the host rejects it)
    // fp32 work tensors of a row (or chunk) of n elements: x in fp32, x^2, gamma in fp32,
    // the reduction's work buffer, and two 32-byte scalars.
    auto fixed = [&](uint64_t n) {
        return 3 * AlignElems(n, 4) * 4 + AlignElems(n, gammaSize) * gammaSize + ReduceWorkBytes(n) + 2 * BLOCK_BYTES;
    };
    auto whole = [&](uint64_t rows) {  // x in, y out (double-buffered), rstd out
        return fixed(numCols) + 2 * 2 * rows * AlignElems(numCols, xSize) * xSize + 2 * AlignBytes(rows * 4);
    };
    auto split = [&](uint64_t n) { return fixed(n) + 2 * 2 * n * xSize + 2 * BLOCK_BYTES; };
    ChooseRowTile(t, ubSize, MaxBlockRows(s), whole, split);
    return t;
}
#endif
