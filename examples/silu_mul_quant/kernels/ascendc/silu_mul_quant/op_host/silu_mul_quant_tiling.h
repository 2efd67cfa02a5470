// Tiling of SiluMulQuant (the plugin example's my_ops::silu_mul_quant, examples/
// plugin_fused_op.py): h = silu(gate) * up (fp32), scale = max|h| / 127,
// y = rint(h * ((1 / max|h|) * 127)) saturated to int8 (all-zero row: scale 0, y 0), per row of
// numCols elements (the last dim).
#pragma once

#include <cstdint>

#include "common/tiling_common.h"

struct SiluMulQuantTilingData {
    OPSDK_ROW_TILING_FIELDS;
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
    auto split = [&](uint64_t n) { return fixed(n) + 2 * 2 * n * xSize + 2 * n + 2 * BLOCK_BYTES; };
    ChooseRowTile(t, ubSize, MaxBlockRows(s), whole, split);
    return t;
}
#endif
