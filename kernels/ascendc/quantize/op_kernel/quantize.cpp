// Quantize (npu_quantize with div_mode=True; int8, uint8 or int32 output) for the vector cores:
// y = sat(rint(x / scales + zero_points)) in fp32, scales / zero_points per channel along the
// last dim, along another dim (axis; one value per row) or per tensor, saturated to the output
// type. T: half, bfloat16_t or float (x); S: float or bfloat16_t (scales); Z: int32_t or
// bfloat16_t (zero_points). Kernel body: common/quantize_base.h (tiling keys 1 / 2).
#include "kernel_operator.h"
#include "../../common/quantize_base.h"

#ifndef DTYPE_X
#define DTYPE_X half
#endif
#ifndef DTYPE_SCALES
#define DTYPE_SCALES float
#endif
#ifndef DTYPE_ZERO_POINTS
#define DTYPE_ZERO_POINTS int32_t
#endif

extern "C" __global__ __aicore__ void quantize(GM_ADDR x, GM_ADDR scales, GM_ADDR zero_points, GM_ADDR y,
                                                GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(QuantizeTilingData);
    GET_TILING_DATA_WITH_STRUCT(QuantizeTilingData, tilingData, tiling);
    (void)workspace;
    opsdk_ascendc::KernelQuantizeBase<DTYPE_X, DTYPE_SCALES, DTYPE_ZERO_POINTS, true> op;
    op.Init(x, scales, zero_points, y, tilingData);
    op.Process();
}
