// AddRmsNorm (npu_add_rms_norm) for the vector cores: x = x1 + x2 (fp32; written in T),
// rstd = 1 / sqrt(mean(x^2) + eps) from the unrounded sum, y = x * rstd * gamma (in T).
// T: half, bfloat16_t or float (x1, x2, gamma, y, x); rstd float.
// The kernel body (tiling keys 1 whole row / 2 split row): common/add_rms_norm_base.h.
#include "kernel_operator.h"
#include "../../common/add_rms_norm_base.h"

#ifndef DTYPE_X1
#define DTYPE_X1 half
#endif

extern "C" __global__ __aicore__ void add_rms_norm(GM_ADDR x1, GM_ADDR x2, GM_ADDR gamma, GM_ADDR y, GM_ADDR rstd,
                                                    GM_ADDR x, GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(AddRmsNormTilingData);
    GET_TILING_DATA_WITH_STRUCT(AddRmsNormTilingData, tilingData, tiling);
    (void)workspace;
    opsdk_ascendc::KernelAddRmsNormBase<DTYPE_X1, false> op;
    op.Init(x1, x2, gamma, nullptr, y, rstd, x, tilingData);
    op.Process();
}
