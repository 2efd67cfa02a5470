// DynamicQuant (npu_dynamic_quant, per token, symmetric; int8 or int4 output) for the vector
// cores: s = x * smooth_scales in fp32 (smooth_scales optional, x's dtype; with group_index,
// MoE, row r takes the smooth_scales row of its group), amax = max|s| per row,
// scale = amax / DMAX, y = rint(s * (DMAX / amax)) saturated (DMAX 127 for int8, 7 for int4
// packed two per byte; amax = 0: scale 0, y 0). T: half or bfloat16_t.
// Kernel body and tiling keys: common/dynamic_quant_base.h (this operator's tiling gives the
// per-token keys 1 / 2 only; DynamicQuantV2 adds per tensor and per channel).
#include "kernel_operator.h"
#include "../../common/dynamic_quant_base.h"

#ifndef DTYPE_X
#define DTYPE_X half
#endif

extern "C" __global__ __aicore__ void dynamic_quant(GM_ADDR x, GM_ADDR smooth_scales, GM_ADDR group_index, GM_ADDR y,
                                                     GM_ADDR scale, GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(DynamicQuantTilingData);
    GET_TILING_DATA_WITH_STRUCT(DynamicQuantTilingData, tilingData, tiling);
    (void)workspace;
    opsdk_ascendc::KernelDynamicQuantBase<DTYPE_X> op;
    op.Init(x, smooth_scales, group_index, y, scale, nullptr, tilingData);
    op.Process();
}
