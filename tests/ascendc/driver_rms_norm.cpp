// ctypes entry of the RmsNorm kernel (kernels/ascendc/rms_norm) on the CPU model.
// Build: g++ -std=c++17 -O1 -shared -fPIC -I kernels/ascendc/model -I kernels/ascendc
//        -DDTYPE_X=half -DDTYPE_GAMMA=float tests/ascendc/driver_rms_norm.cpp
#include "driver_common.h"
#include "rms_norm/op_kernel/rms_norm.cpp"

extern "C" int opsdk_tiling(uint64_t rows, uint32_t cols, float eps, uint32_t coreNum, uint32_t ubBytes,
                                     RmsNormTilingData *out)
{
    *out = TilingRmsNorm(rows, cols, sizeof(DTYPE_X), sizeof(DTYPE_GAMMA), eps, coreNum, ubBytes);
    return static_cast<int>(sizeof(RmsNormTilingData));
}

extern "C" int opsdk_run(void *x, void *gamma, void *y, void *rstd, uint64_t rows, uint32_t cols, float eps,
                                  uint32_t coreNum, uint32_t ubBytes, uint32_t *keyOut, char *err, int errLen)
{
    RmsNormTilingData td = TilingRmsNorm(rows, cols, sizeof(DTYPE_X), sizeof(DTYPE_GAMMA), eps, coreNum, ubBytes);
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer");
        return 2;
    }
    uint64_t n = rows * cols;
    OPSDK_GM(x, n * sizeof(DTYPE_X), "x");
    OPSDK_GM(gamma, cols * sizeof(DTYPE_GAMMA), "gamma");
    OPSDK_GM(y, n * sizeof(DTYPE_X), "y");
    OPSDK_GM(rstd, rows * sizeof(float), "rstd");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {
        rms_norm((GM_ADDR)x, (GM_ADDR)gamma, (GM_ADDR)y, (GM_ADDR)rstd, nullptr, (GM_ADDR)&td);
    });
}
