// ctypes entry of the AddRmsNormQuant kernel (kernels/ascendc/add_rms_norm_quant) on the CPU
// model. -DDTYPE_X1=half|bfloat16_t|float -DDTYPE_SCALES1=float|half|bfloat16_t
// -DDTYPE_ZERO_POINTS1=int32_t|float|half|bfloat16_t (the rows of add_rms_norm_quant_def.cpp).
// outType: 0 int8, 1 float8_e5m2, 2 float8_e4m3fn, 3 hifloat8 (y1 / y2 one byte per element).
#include "driver_common.h"
#include "add_rms_norm_quant/op_kernel/add_rms_norm_quant.cpp"

static AddRmsNormQuantTilingData Tiling(uint64_t rows, uint32_t cols, float eps, const void *scales2, const void *zp1,
                                        const void *zp2, const void *beta, int divMode, int64_t axis, uint32_t outType,
                                        uint32_t coreNum, uint32_t ubBytes)
{
    return TilingAddRmsNormQuant(rows, cols, sizeof(DTYPE_X1), eps, scales2 != nullptr, zp1 != nullptr, zp2 != nullptr,
                                 beta != nullptr, divMode != 0, axis, coreNum, ubBytes, outType);
}

extern "C" int opsdk_tiling(uint64_t rows, uint32_t cols, float eps, void *scales2, void *zp1, void *zp2, void *beta,
                            int divMode, int64_t axis, uint32_t outType, uint32_t coreNum, uint32_t ubBytes,
                            AddRmsNormQuantTilingData *out)
{
    *out = Tiling(rows, cols, eps, scales2, zp1, zp2, beta, divMode, axis, outType, coreNum, ubBytes);
    return static_cast<int>(sizeof(AddRmsNormQuantTilingData));
}

extern "C" int opsdk_run(void *x1, void *x2, void *gamma, void *scales1, void *scales2, void *zp1, void *zp2, void *beta,
                         void *y1, void *y2, void *x, uint64_t rows, uint32_t cols, float eps, int divMode, int64_t axis,
                         uint32_t outType, uint32_t coreNum, uint32_t ubBytes, uint32_t *keyOut, char *err, int errLen)
{
    AddRmsNormQuantTilingData td =
        Tiling(rows, cols, eps, scales2, zp1, zp2, beta, divMode, axis, outType, coreNum, ubBytes);
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen,
                               "tiling: no tiling fits the unified buffer, axis is not -1, or the output type is unknown");
        return 2;
    }
    uint64_t n = rows * cols;
    OPSDK_GM(x1, n * sizeof(DTYPE_X1), "x1");
    OPSDK_GM(x2, n * sizeof(DTYPE_X1), "x2");
    OPSDK_GM(gamma, cols * sizeof(DTYPE_X1), "gamma");
    OPSDK_GM(scales1, cols * sizeof(DTYPE_SCALES1), "scales1");
    OPSDK_GM(scales2, cols * sizeof(DTYPE_SCALES1), "scales2");
    OPSDK_GM(zp1, cols * sizeof(DTYPE_ZERO_POINTS1), "zero_points1");
    OPSDK_GM(zp2, cols * sizeof(DTYPE_ZERO_POINTS1), "zero_points2");
    OPSDK_GM(beta, cols * sizeof(DTYPE_X1), "beta");
    OPSDK_GM(y1, n, "y1");
    OPSDK_GM(y2, n, "y2");
    OPSDK_GM(x, n * sizeof(DTYPE_X1), "x");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {
        add_rms_norm_quant((GM_ADDR)x1, (GM_ADDR)x2, (GM_ADDR)gamma, (GM_ADDR)scales1, (GM_ADDR)scales2, (GM_ADDR)zp1,
                           (GM_ADDR)zp2, (GM_ADDR)beta, (GM_ADDR)y1, (GM_ADDR)y2, (GM_ADDR)x, nullptr, (GM_ADDR)&td);
    });
}
