// DynamicQuantV2 (npu_dynamic_quant with quant_mode "pertensor" / "perchannel", symmetric;
// int8 or int4 output) for the vector cores: DynamicQuant's computation with amax taken per
// token (row), per tensor or per channel (over dim -2; smooth_scales then has one factor per
// row of dim -2), and an offset output written as zeros (symmetric quantisation). T: half or
// bfloat16_t. Kernel body and tiling keys: common/dynamic_quant_base.h.
#include "kernel_operator.h"
#include "../../common/dynamic_quant_base.h"
#include "../op_host/dynamic_quant_v2_tiling.h"

#ifndef DTYPE_X
#define DTYPE_X half
#endif

extern "C" __global__ __aicore__ void dynamic_quant_v2(GM_ADDR x, GM_ADDR smooth_scales, GM_ADDR group_index, GM_ADDR y,
                                                        GM_ADDR scale, GM_ADDR offset, GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(DynamicQuantV2TilingData);
    GET_TILING_DATA_WITH_STRUCT(DynamicQuantV2TilingData, tilingData, tiling);
    (void)workspace;
    opsdk_ascendc::KernelDynamicQuantBase<DTYPE_X> op;
    op.Init(x, smooth_scales, group_index, y, scale, offset, tilingData);
    op.Process();
}
