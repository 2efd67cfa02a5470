// Tiling of AddRmsNormDynamicQuant (npu_add_rms_norm_dynamic_quant): AddRmsNormQuant's tiling
// (add_rms_norm_quant/op_host/add_rms_norm_quant_tiling.h) with dynamic branches, whose
// scale outputs are counted in the unified-buffer budget, and the output_mask rules.
#pragma once

#include "../../add_rms_norm_quant/op_host/add_rms_norm_quant_tiling.h"

using AddRmsNormDynamicQuantTilingData = AddRmsNormQuantTilingData;

#ifndef __CCE_AICORE__
// Which branches run (npu_add_rms_norm_dynamic_quant's output_mask semantics): without a mask
// branch 1 always runs and branch 2 when both smooth scales are given; with a mask, the mask
// selects. Returns false for the combinations the operator rejects (both False, a smooth
// scale for a branch that does not run, smooth_scale2 without smooth_scale1 and no mask).
inline bool AddRmsNormDynamicQuantBranches(bool hasMask, bool mask0, bool mask1, bool hasSmooth1, bool hasSmooth2,
                                           bool &run1, bool &run2)
{
    if (!hasMask) {
        if (hasSmooth2 && !hasSmooth1) return false;
        run1 = true;
        run2 = hasSmooth1 && hasSmooth2;
        return true;
    }
    if (!(mask0 || mask1) || (hasSmooth1 && !mask0) || (hasSmooth2 && !mask1)) return false;
    run1 = mask0;
    run2 = mask1;
    return true;
}

// xSize: element bytes of x1 / x2 / gamma / smooth scales / beta / x (2). int4Out: y1 / y2 in
// int4 (DMAX 7; numCols a multiple of 8). outType: OUT_INT8 (int8 / int4) or an 8-bit float
// output (Ascend 950: scale = amax * (1 / DTYPE_MAX), y = v / scale cast, saturating). Key 0
// for the rejected output_mask combinations.
inline AddRmsNormDynamicQuantTilingData TilingAddRmsNormDynamicQuant(uint64_t numRows, uint32_t numCols, uint32_t xSize,
                                                                     float epsilon, bool hasSmooth1, bool hasSmooth2,
                                                                     bool hasBeta, bool hasMask, bool mask0, bool mask1,
                                                                     bool int4Out, uint32_t coreNum, uint32_t ubSize,
                                                                     uint32_t outType = 0)
{
    bool run1 = false, run2 = false;
    bool ok = AddRmsNormDynamicQuantBranches(hasMask, mask0, mask1, hasSmooth1, hasSmooth2, run1, run2);
    AddRmsNormQuantFeatures f{true, hasBeta, run1, run2, hasSmooth1, hasSmooth2, false, false, false, int4Out};
    f.outType = outType;
    AddRmsNormDynamicQuantTilingData t =
        TilingAddRmsNormQuantCommon(numRows, numCols, xSize, epsilon, f, coreNum, ubSize);
    if (!ok) t.tilingKey = opsdk_ascendc::TILING_KEY_INVALID;
    return t;
}
#endif
