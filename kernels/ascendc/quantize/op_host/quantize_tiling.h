// Tiling of the static quantisation of npu_quantize (int8, uint8, int32 or int4 output): Quantize (div_mode=True,
// y = sat(rint(x / scales + zero_points))) and AscendQuantV2 (div_mode=False,
// y = sat(round(x * scale (* scale) + offset)), its tiling in ascend_quant_v2/op_host). Scales
// (and zero points) are per channel along the last dim (numCols of them), per row (along
// another dim: one value per row) or per tensor (one); numRows rows of numCols elements.
// Kernel body: common/quantize_base.h.
#pragma once

#include <cstdint>

#include "../../common/tiling_common.h"

struct QuantizeTilingData {
    OPSDK_ROW_TILING_FIELDS;
    uint32_t perTensor;     // one scale (and zero point) for the whole tensor
    uint32_t hasZero;       // zero points / offset given
    uint32_t perRow;        // scales along a dim other than the last: row r takes scale (r / chanInner) % chanCount
    uint32_t sqrtMode;      // AscendQuantV2: x * scale * scale
    uint64_t chanCount;     // per row: the size of the scales' dim
    uint64_t chanInner;     // per row: rows per step of that dim (the product of the dims between it and the last)
    uint32_t roundMode;     // QUANT_ROUND_*: rint (torch.round), floor, ceil, trunc
    uint32_t outType;       // QUANT_OUT_*: int8, uint8, int32, int4 (two per byte, element 0 in the low nibble)
};

constexpr uint32_t QUANT_OUT_INT8 = 0;
constexpr uint32_t QUANT_OUT_UINT8 = 1;
constexpr uint32_t QUANT_OUT_INT32 = 2;
constexpr uint32_t QUANT_OUT_INT4 = 3;

constexpr uint32_t QUANT_ROUND_RINT = 0;
constexpr uint32_t QUANT_ROUND_FLOOR = 1;
constexpr uint32_t QUANT_ROUND_CEIL = 2;
constexpr uint32_t QUANT_ROUND_TRUNC = 3;

#ifndef __CCE_AICORE__
// xSize: element bytes of x. scaleLen: elements of the scales. ax: the scales' dim (0 ..
// rank - 1, already normalised; negative or >= rank: key 0); axDim: its size; inner: the
// product of the dims between ax and the last (1 when ax = rank - 2). Scales are per tensor
// (scaleLen 1), per channel along the last dim (ax = rank - 1, scaleLen numCols) or per row
// (ax < rank - 1, scaleLen axDim); anything else: key 0. The staging buffer of scales / zero
// points is counted at 4 bytes per element.
// outType: QUANT_OUT_* (int4: numCols a multiple of 8; anything past QUANT_OUT_INT4: key 0).
inline QuantizeTilingData TilingQuantizeCommon(uint64_t numRows, uint32_t numCols, uint32_t xSize, uint64_t scaleLen,
                                               bool hasZero, int64_t rank, int64_t ax, uint64_t axDim, uint64_t inner,
                                               uint32_t outType, uint32_t coreNum, uint32_t ubSize)
{
    using namespace opsdk_ascendc;
    QuantizeTilingData t{};
    BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
    t.perTensor = scaleLen == 1 ? 1 : 0;
    t.hasZero = hasZero ? 1 : 0;
    t.outType = outType;
    if (numCols == 0 || ax < 0 || ax >= rank || outType > QUANT_OUT_INT4) return t;
    if (outType == QUANT_OUT_INT4 && numCols % 8 != 0) return t;
    auto yBytes = [&](uint64_t n) {
        return AlignBytes(outType == QUANT_OUT_INT32 ? 4 * n : outType == QUANT_OUT_INT4 ? n / 2 : n);
    };
    if (!t.perTensor) {
        if (ax == rank - 1) {
            if (scaleLen != numCols) return t;
        } else {
            if (scaleLen != axDim || inner == 0) return t;
            t.perRow = 1;
            t.chanCount = axDim;
            t.chanInner = inner;
        }
    }
    auto fixed = [&](uint64_t n) {  // scales (+ zero points) in fp32, their staging, x in fp32, int32 and half tmps, scalar
        return (1 + t.hasZero) * AlignElems(n, 4) * 4 + AlignBytes(n * 4) + 2 * AlignElems(n, 4) * 4 +
               AlignElems(n, 2) * 2 + BLOCK_BYTES;
    };
    auto whole = [&](uint64_t rows) {  // x in, y out (double-buffered)
        return fixed(numCols) + 2 * rows * AlignElems(numCols, xSize) * xSize + 2 * rows * yBytes(numCols);
    };
    auto split = [&](uint64_t n) { return fixed(n) + 2 * n * xSize + 2 * yBytes(n); };
    ChooseRowTile(t, ubSize, MaxBlockRows(s), whole, split);
    return t;
}

// Quantize (div_mode=True). rank / axis: x's rank and the axis attribute (negative counts from
// the end); axDim / inner: see TilingQuantizeCommon. outType: QUANT_OUT_INT8 / UINT8 / INT32
// (the dtype attribute torch.qint8 / torch.int8, torch.quint8 / torch.uint8, torch.qint32 /
// torch.int32); int4 or anything else: key 0.
inline QuantizeTilingData TilingQuantize(uint64_t numRows, uint32_t numCols, uint32_t xSize, uint64_t scaleLen,
                                         bool hasZeroPoints, int64_t rank, int64_t axis, uint64_t axDim, uint64_t inner,
                                         uint32_t outType, uint32_t coreNum, uint32_t ubSize)
{
    int64_t ax = axis < 0 ? axis + rank : axis;
    QuantizeTilingData t = TilingQuantizeCommon(numRows, numCols, xSize, scaleLen, hasZeroPoints, rank, ax, axDim, inner,
                                                outType, coreNum, ubSize);
    if (outType > QUANT_OUT_INT32) t.tilingKey = opsdk_ascendc::TILING_KEY_INVALID;
    return t;
}
#endif
