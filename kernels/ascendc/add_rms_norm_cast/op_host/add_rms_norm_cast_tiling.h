// Tiling of AddRmsNormCast (npu_add_rms_norm_cast): AddRmsNorm's tiling with the fp32 y1
// output counted in the unified-buffer budget (add_rms_norm/op_host/add_rms_norm_tiling.h).
#pragma once

#include "../../add_rms_norm/op_host/add_rms_norm_tiling.h"

using AddRmsNormCastTilingData = AddRmsNormTilingData;

#ifndef __CCE_AICORE__
inline AddRmsNormCastTilingData TilingAddRmsNormCast(uint64_t numRows, uint32_t numCols, uint32_t xSize, float epsilon,
                                                     uint32_t coreNum, uint32_t ubSize)
{
    return TilingAddRmsNorm(numRows, numCols, xSize, epsilon, coreNum, ubSize, true);
}
#endif
