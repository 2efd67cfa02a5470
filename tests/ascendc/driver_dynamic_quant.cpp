// ctypes entry of the DynamicQuant kernel (kernels/ascendc/dynamic_quant) on the CPU model.
// -DDTYPE_X=half|bfloat16_t
#include "driver_common.h"
#include "dynamic_quant/op_kernel/dynamic_quant.cpp"

extern "C" int opsdk_run(void *x, void *smooth, void *y, void *scale, uint64_t rows, uint32_t cols, uint32_t coreNum,
                         uint32_t ubBytes, uint32_t *keyOut, char *err, int errLen)
{
    DynamicQuantTilingData td = TilingDynamicQuant(rows, cols, sizeof(DTYPE_X), smooth != nullptr, false, coreNum, ubBytes);
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer");
        return 2;
    }
    uint64_t n = rows * cols;
    OPSDK_GM(x, n * sizeof(DTYPE_X), "x");
    OPSDK_GM(smooth, cols * sizeof(DTYPE_X), "smooth_scales");
    OPSDK_GM(y, n, "y");
    OPSDK_GM(scale, rows * sizeof(float), "scale");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {
        dynamic_quant((GM_ADDR)x, (GM_ADDR)smooth, nullptr, (GM_ADDR)y, (GM_ADDR)scale, nullptr, (GM_ADDR)&td);
    });
}
