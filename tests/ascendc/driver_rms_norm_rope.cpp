// ctypes entry of the RmsNormRope kernel (kernels/ascendc/rms_norm_rope) on op_sdk's CPU model of
// the Ascend C API: computes the tiling with the kernel's plain tiling function and runs the
// kernel once per block index. -DDTYPE_X=half|bfloat16_t|float -DDTYPE_GAMMA=(DTYPE_X|float).
#include "driver_common.h"
#include "rms_norm_rope/op_kernel/rms_norm_rope.cpp"

extern "C" int opsdk_tiling(const int64_t *xShape, const int64_t *cosShape, uint32_t rank, float eps, uint32_t coreNum,
                            uint32_t ubBytes, RmsNormRopeTilingData *out)
{
    *out = TilingRmsNormRope(xShape, cosShape, rank, sizeof(DTYPE_X), sizeof(DTYPE_GAMMA), eps, coreNum, ubBytes);
    return static_cast<int>(sizeof(RmsNormRopeTilingData));
}

extern "C" int opsdk_run(void *x, void *gamma, void *cos, void *sin, void *y, const int64_t *xShape,
                         const int64_t *cosShape, uint32_t rank, float eps, uint32_t coreNum, uint32_t ubBytes,
                         uint32_t *keyOut, char *err, int errLen)
{
    RmsNormRopeTilingData td =
        TilingRmsNormRope(xShape, cosShape, rank, sizeof(DTYPE_X), sizeof(DTYPE_GAMMA), eps, coreNum, ubBytes);
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer");
        return 2;
    }
    uint64_t n = 1, nc = 1;
    for (uint32_t k = 0; k < rank; ++k) {
        n *= static_cast<uint64_t>(xShape[k]);
        nc *= static_cast<uint64_t>(cosShape[k]);
    }
    OPSDK_GM(x, n * sizeof(DTYPE_X), "x");
    OPSDK_GM(gamma, td.numCols * sizeof(DTYPE_GAMMA), "gamma");
    OPSDK_GM(cos, nc * sizeof(DTYPE_X), "cos");
    OPSDK_GM(sin, nc * sizeof(DTYPE_X), "sin");
    OPSDK_GM(y, n * sizeof(DTYPE_X), "y");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {
        rms_norm_rope((GM_ADDR)x, (GM_ADDR)gamma, (GM_ADDR)cos, (GM_ADDR)sin, (GM_ADDR)y, nullptr, (GM_ADDR)&td);
    });
}
