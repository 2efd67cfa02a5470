// Tiling of DynamicQuantV2 (npu_dynamic_quant with quant_mode "pertensor" / "perchannel", or
// per token through this operator): DynamicQuant's tiling (dynamic_quant/op_host/
// dynamic_quant_tiling.h) with the attributes of this operator checked.
#pragma once

#include "../../dynamic_quant/op_host/dynamic_quant_tiling.h"

using DynamicQuantV2TilingData = DynamicQuantTilingData;

#ifndef __CCE_AICORE__
// quantMode: DQ_MODE_* (the tiling callback maps "pertoken" / "pertensor" / "perchannel"; any
// other string gives key 0). isSymmetrical false (asymmetric, scale and offset from max and
// min) is not implemented (key 0; npu_dynamic_quant never asks for it). outType: OUT_INT8 or
// an 8-bit float output; dstTypeMax sets hifloat8's DTYPE_MAX (in [0, 32768], 0: 32768) and
// must be 0 for the other outputs (key 0 otherwise).
inline DynamicQuantV2TilingData TilingDynamicQuantV2(uint64_t numRows, uint32_t numCols, uint32_t xSize, bool hasSmooth,
                                                     uint32_t numGroups, uint32_t quantMode, uint64_t chanRows,
                                                     bool int4Out, bool isSymmetrical, float dstTypeMax,
                                                     uint32_t coreNum, uint32_t ubSize, uint32_t outType = 0)
{
    using namespace opsdk_ascendc;
    DynamicQuantV2TilingData t =
        TilingDynamicQuant(numRows, numCols, xSize, hasSmooth, numGroups, quantMode, chanRows, int4Out, coreNum, ubSize,
                           outType, DynamicQuantFloat8Max(outType, dstTypeMax));
    bool maxOk = outType == OUT_HIFLOAT8 ? (dstTypeMax >= 0.0f && dstTypeMax <= 32768.0f) : dstTypeMax == 0.0f;
    if (!isSymmetrical || !maxOk) t.tilingKey = TILING_KEY_INVALID;
    return t;
}
#endif
