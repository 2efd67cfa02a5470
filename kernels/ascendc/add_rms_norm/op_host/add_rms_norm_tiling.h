// Tiling of AddRmsNorm (npu_add_rms_norm): x = x1 + x2 (fp32), rstd = 1 / sqrt(mean(x^2) + eps),
// y = x * rstd * gamma, over numCols = numel(gamma) elements of each of numRows rows.
// Shared with AddRmsNormCast (withFp32Y: y also written in fp32).
#pragma once

#include <cstdint>

#include "../../common/tiling_common.h"

struct AddRmsNormTilingData {
    OPSDK_ROW_TILING_FIELDS;
    float epsilon;
    float avgFactor;        // 1 / numCols
};

#ifndef __CCE_AICORE__
// xSize: element bytes of x1 / x2 / gamma / y / x (2 or 4).
inline AddRmsNormTilingData TilingAddRmsNorm(uint64_t numRows, uint32_t numCols, uint32_t xSize, float epsilon,
                                             uint32_t coreNum, uint32_t ubSize, bool withFp32Y = false)
{
    using namespace opsdk_ascendc;
    AddRmsNormTilingData t{};
    BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
    t.epsilon = epsilon;
    t.avgFactor = numCols ? 1.0f / static_cast<float>(numCols) : 0.0f;
    if (numCols == 0) return t;
    auto fixed = [&](uint64_t n) {  // gamma, gamma / x / x^2 in fp32, reduction work, 2 scalars
        return 3 * AlignElems(n, 4) * 4 + AlignElems(n, xSize) * xSize + ReduceWorkBytes(n) + 2 * BLOCK_BYTES;
    };
    auto whole = [&](uint64_t rows) {  // x1, x2 in; y, x out (double-buffered); fp32 y; rstd
        return fixed(numCols) + 4 * 2 * rows * AlignElems(numCols, xSize) * xSize +
               (withFp32Y ? 2 * rows * AlignElems(numCols, 4) * 4 : 0) + 2 * AlignBytes(rows * 4);
    };
    auto split = [&](uint64_t n) {
        return fixed(n) + 4 * 2 * n * xSize + (withFp32Y ? 2 * n * 4 : 0) + 2 * BLOCK_BYTES;
    };
    ChooseRowTile(t, ubSize, MaxBlockRows(s), whole, split);
    return t;
}
#endif
