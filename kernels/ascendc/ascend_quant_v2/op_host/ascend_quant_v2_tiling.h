// Tiling of AscendQuantV2 (npu_quantize with div_mode=False, int8 / int4): Quantize's tiling
// (quantize/op_host/quantize_tiling.h); y = sat(round(x * scale (* scale) + offset)).
#pragma once

#include "../../quantize/op_host/quantize_tiling.h"

using AscendQuantV2TilingData = QuantizeTilingData;

#ifndef __CCE_AICORE__
// Per-channel scales lie along the last dim (axis -1 / rank - 1) or dim -2 (axis -2 / rank - 2:
// one scale per row of dim -2, npu_quantize's per-head scales); axDim / inner as for
// TilingQuantizeCommon. sqrtMode: y = x * scale * scale (+ offset). roundMode: QUANT_ROUND_*
// (the tiling callback maps "round" (rint, as torch.round), "floor", "ceil", "trunc"; any other
// mode: roundMode > QUANT_ROUND_TRUNC, key 0). outType: QUANT_OUT_INT8 or QUANT_OUT_INT4
// (dst_type DT_INT8 / DT_INT4, npu_quantize's quint4x2; others: key 0).
inline AscendQuantV2TilingData TilingAscendQuantV2(uint64_t numRows, uint32_t numCols, uint32_t xSize,
                                                   uint64_t scaleLen, bool hasOffset, int64_t rank, int64_t axis,
                                                   uint64_t axDim, uint64_t inner, bool sqrtMode, uint32_t roundMode,
                                                   uint32_t outType, uint32_t coreNum, uint32_t ubSize)
{
    int64_t ax = axis < 0 ? axis + rank : axis;
    AscendQuantV2TilingData t = TilingQuantizeCommon(numRows, numCols, xSize, scaleLen, hasOffset, rank, ax, axDim,
                                                     inner, outType, coreNum, ubSize);
    t.sqrtMode = sqrtMode ? 1 : 0;
    t.roundMode = roundMode;
    bool outOk = outType == QUANT_OUT_INT8 || outType == QUANT_OUT_INT4;
    if (roundMode > QUANT_ROUND_TRUNC || !outOk || (scaleLen != 1 && ax != rank - 1 && ax != rank - 2))
        t.tilingKey = opsdk_ascendc::TILING_KEY_INVALID;
    return t;
}
#endif
