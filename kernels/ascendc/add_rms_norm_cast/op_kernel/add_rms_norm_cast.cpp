// AddRmsNormCast (npu_add_rms_norm_cast) for the vector cores: AddRmsNorm with y written
// twice: y1 in fp32 (the unrounded result) and y2 rounded to T; rstd float; x = x1 + x2 in T.
// T: half or bfloat16_t. Kernel body: common/add_rms_norm_base.h (tiling keys 1 / 2).
#include "kernel_operator.h"
#include "../../common/add_rms_norm_base.h"
#include "../op_host/add_rms_norm_cast_tiling.h"

#ifndef DTYPE_X1
#define DTYPE_X1 half
#endif

extern "C" __global__ __aicore__ void add_rms_norm_cast(GM_ADDR x1, GM_ADDR x2, GM_ADDR gamma, GM_ADDR y1, GM_ADDR y2,
                                                         GM_ADDR rstd, GM_ADDR x, GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(AddRmsNormCastTilingData);
    GET_TILING_DATA_WITH_STRUCT(AddRmsNormCastTilingData, tilingData, tiling);
    (void)workspace;
    opsdk_ascendc::KernelAddRmsNormBase<DTYPE_X1, true> op;
    op.Init(x1, x2, gamma, y1, y2, rstd, x, tilingData);
    op.Process();
}
