// Tiling of AscendQuantV2 (npu_quantize with div_mode=False, int8): Quantize's tiling
// (quantize/op_host/quantize_tiling.h); y = sat(rint(x * scale + offset)).
#pragma once

#include "../../quantize/op_host/quantize_tiling.h"

using AscendQuantV2TilingData = QuantizeTilingData;

#ifndef __CCE_AICORE__
// sqrtMode (scale squared) and round modes other than "round" (rint) are not implemented, and
// the output must be int8 (key 0 otherwise). Per-channel scales must lie along the last dim:
// axis -1 or rank - 1 (npu_quantize coerces any axis >= -1 to -1; axis -2 is not implemented).
inline AscendQuantV2TilingData TilingAscendQuantV2(uint64_t numRows, uint32_t numCols, uint32_t xSize,
                                                   uint64_t scaleLen, bool hasOffset, int64_t rank, int64_t axis,
                                                   bool sqrtMode, bool roundRint, bool int8Output, uint32_t coreNum,
                                                   uint32_t ubSize)
{
    AscendQuantV2TilingData t = TilingQuantizeCommon(numRows, numCols, xSize, scaleLen, hasOffset, coreNum, ubSize);
    int64_t ax = axis < 0 ? axis + rank : axis;
    if (sqrtMode || !roundRint || !int8Output || (scaleLen != 1 && ax != rank - 1))
        t.tilingKey = opsdk_ascendc::TILING_KEY_INVALID;
    return t;
}
#endif
