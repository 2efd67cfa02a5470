// AscendQuantV2 (npu_quantize with div_mode=False; int8 or int4 output) for the vector cores:
// y = sat(round(x * scale + offset)) in fp32 (x * scale * scale with sqrt_mode; round_mode
// "round" = rint, "floor", "ceil", "trunc"), scale / offset per channel along the last dim,
// per row of dim -2 (axis -2) or per tensor, in x's dtype. T: half, bfloat16_t or float.
// Kernel body: common/quantize_base.h (tiling keys 1 / 2).
#include "kernel_operator.h"
#include "../../common/quantize_base.h"
#include "../op_host/ascend_quant_v2_tiling.h"

#ifndef DTYPE_X
#define DTYPE_X half
#endif
#ifndef DTYPE_SCALE
#define DTYPE_SCALE DTYPE_X
#endif
#ifndef DTYPE_OFFSET
#define DTYPE_OFFSET DTYPE_X
#endif

extern "C" __global__ __aicore__ void ascend_quant_v2(GM_ADDR x, GM_ADDR scale, GM_ADDR offset, GM_ADDR y,
                                                       GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(AscendQuantV2TilingData);
    GET_TILING_DATA_WITH_STRUCT(AscendQuantV2TilingData, tilingData, tiling);
    (void)workspace;
    opsdk_ascendc::KernelQuantizeBase<DTYPE_X, DTYPE_SCALE, DTYPE_OFFSET, false> op;
    op.Init(x, scale, offset, y, tilingData);
    op.Process();
}
