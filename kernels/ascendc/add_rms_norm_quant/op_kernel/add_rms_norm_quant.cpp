// AddRmsNormQuant (npu_add_rms_norm_quant; int8, and on Ascend 950 float8_e5m2 /
// float8_e4m3fn / hifloat8 outputs) for the vector cores: x = x1 + x2 (fp32; written in T),
// rstd from the unrounded sum, y = x * rstd * gamma (+ beta) in fp32; v = y / scales1 +
// zero_points1 (div_mode; y * scales1 otherwise), y1 = sat(rint(v)) in int8 or v cast to the
// 8-bit float output (tiling field outType), y2 the same with scales2 / zero_points2, all
// zeros without scales2.
// T: half, bfloat16_t or float (x1, x2, gamma, beta, x); S: scales, Z: zero points, one row
// of the dtype table (op_host/add_rms_norm_quant_def.cpp): half x with (float, int32_t),
// (half, half) or (float, float); bfloat16_t x with (float, int32_t), (bfloat16_t,
// bfloat16_t) or (float, float); float x with (float, float).
// Kernel body: common/add_rms_norm_quant_base.h (tiling keys 1 / 2).
#include "kernel_operator.h"
#include "../../common/add_rms_norm_quant_base.h"

#ifndef DTYPE_X1
#define DTYPE_X1 half
#endif
#ifndef DTYPE_SCALES1
#define DTYPE_SCALES1 float
#endif
#ifndef DTYPE_ZERO_POINTS1
#define DTYPE_ZERO_POINTS1 int32_t
#endif

extern "C" __global__ __aicore__ void add_rms_norm_quant(GM_ADDR x1, GM_ADDR x2, GM_ADDR gamma, GM_ADDR scales1,
                                                          GM_ADDR scales2, GM_ADDR zero_points1, GM_ADDR zero_points2,
                                                          GM_ADDR beta, GM_ADDR y1, GM_ADDR y2, GM_ADDR x,
                                                          GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(AddRmsNormQuantTilingData);
    GET_TILING_DATA_WITH_STRUCT(AddRmsNormQuantTilingData, tilingData, tiling);
    (void)workspace;
    opsdk_ascendc::KernelAddRmsNormQuantBase<DTYPE_X1, DTYPE_SCALES1, DTYPE_ZERO_POINTS1, false> op;
    op.Init(x1, x2, gamma, scales1, scales2, zero_points1, zero_points2, beta, y1, y2, x, nullptr, nullptr, tilingData);
    op.Process();
}
