// AddRmsNormDynamicQuant (npu_add_rms_norm_dynamic_quant, int8 or int4) for the vector cores:
// x = x1 + x2 (fp32; written in T), rstd from the unrounded sum, y = x * rstd * gamma (+ beta)
// in fp32; branch i (the ones the tiling selects): v = y (* smooth_scale_i),
// scale_i = max|v| / DMAX, y_i = rint(v * (DMAX / max|v|)) saturated (all-zero row: 0, 0);
// DMAX 127 for int8, 7 for int4 (packed two per byte, element 0 in the low nibble).
// T: half or bfloat16_t (x1, x2, gamma, smooth scales, beta, x). Outputs of a branch that does
// not run are not written. Kernel body: common/add_rms_norm_quant_base.h (tiling keys 1 / 2).
#include "kernel_operator.h"
#include "../../common/add_rms_norm_quant_base.h"
#include "../op_host/add_rms_norm_dynamic_quant_tiling.h"

#ifndef DTYPE_X1
#define DTYPE_X1 half
#endif

extern "C" __global__ __aicore__ void add_rms_norm_dynamic_quant(GM_ADDR x1, GM_ADDR x2, GM_ADDR gamma,
                                                                  GM_ADDR smooth_scale1, GM_ADDR smooth_scale2,
                                                                  GM_ADDR beta, GM_ADDR y1, GM_ADDR y2, GM_ADDR x,
                                                                  GM_ADDR scale1, GM_ADDR scale2, GM_ADDR workspace,
                                                                  GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(AddRmsNormDynamicQuantTilingData);
    GET_TILING_DATA_WITH_STRUCT(AddRmsNormDynamicQuantTilingData, tilingData, tiling);
    (void)workspace;
    opsdk_ascendc::KernelAddRmsNormQuantBase<DTYPE_X1, DTYPE_X1, DTYPE_X1, true> op;
    op.Init(x1, x2, gamma, smooth_scale1, smooth_scale2, nullptr, nullptr, beta, y1, y2, x, scale1, scale2, tilingData);
    op.Process();
}
