// ctypes entry of the AddRmsNorm kernel (kernels/ascendc/add_rms_norm) on the CPU model.
// -DDTYPE_X1=half|bfloat16_t|float
#include "driver_common.h"
#include "add_rms_norm/op_kernel/add_rms_norm.cpp"

extern "C" int opsdk_run(void *x1, void *x2, void *gamma, void *y, void *rstd, void *x, uint64_t rows, uint32_t cols,
                         float eps, uint32_t coreNum, uint32_t ubBytes, uint32_t *keyOut, char *err, int errLen)
{
    AddRmsNormTilingData td = TilingAddRmsNorm(rows, cols, sizeof(DTYPE_X1), eps, coreNum, ubBytes);
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer");
        return 2;
    }
    uint64_t n = rows * cols;
    OPSDK_GM(x1, n * sizeof(DTYPE_X1), "x1");
    OPSDK_GM(x2, n * sizeof(DTYPE_X1), "x2");
    OPSDK_GM(gamma, cols * sizeof(DTYPE_X1), "gamma");
    OPSDK_GM(y, n * sizeof(DTYPE_X1), "y");
    OPSDK_GM(rstd, rows * sizeof(float), "rstd");
    OPSDK_GM(x, n * sizeof(DTYPE_X1), "x");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {
        add_rms_norm((GM_ADDR)x1, (GM_ADDR)x2, (GM_ADDR)gamma, (GM_ADDR)y, (GM_ADDR)rstd, (GM_ADDR)x, nullptr,
                     (GM_ADDR)&td);
    });
}
