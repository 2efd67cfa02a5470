// Tiling of DynamicQuantV2 (npu_dynamic_quant with quant_mode "pertensor" / "perchannel", or
// per token through this operator): DynamicQuant's tiling (dynamic_quant/op_host/
// dynamic_quant_tiling.h) with the attributes of this operator checked.
#pragma once

#include "../../dynamic_quant/op_host/dynamic_quant_tiling.h"

using DynamicQuantV2TilingData = DynamicQuantTilingData;

#ifndef __CCE_AICORE__
// quantMode: DQ_MODE_* (the tiling callback maps "pertoken" / "pertensor" / "perchannel"; any
// other string gives key 0). isSymmetrical false (asymmetric, scale and offset from max and
// min) is not implemented, nor a dst_type_max other than 0 (it only sets hifloat8's range):
// key 0.
inline DynamicQuantV2TilingData TilingDynamicQuantV2(uint64_t numRows, uint32_t numCols, uint32_t xSize, bool hasSmooth,
                                                     uint32_t numGroups, uint32_t quantMode, uint64_t chanRows,
                                                     bool int4Out, bool isSymmetrical, float dstTypeMax,
                                                     uint32_t coreNum, uint32_t ubSize)
{
    DynamicQuantV2TilingData t = TilingDynamicQuant(numRows, numCols, xSize, hasSmooth, numGroups, quantMode, chanRows,
                                                    int4Out, coreNum, ubSize);
    if (!isSymmetrical || dstTypeMax != 0.0f) t.tilingKey = opsdk_ascendc::TILING_KEY_INVALID;
    return t;
}
#endif
