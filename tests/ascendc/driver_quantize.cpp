// ctypes entries of the Quantize and AscendQuantV2 kernels (kernels/ascendc/quantize,
// ascend_quant_v2: npu_quantize with div_mode True / False) on the CPU model.
// -DDTYPE_X=half|bfloat16_t|float -DDTYPE_SCALES=... -DDTYPE_ZERO_POINTS=... (Quantize)
// -DDTYPE_SCALE / DTYPE_OFFSET: x's dtype (AscendQuantV2)
#include "driver_common.h"
#include "quantize/op_kernel/quantize.cpp"
#include "ascend_quant_v2/op_kernel/ascend_quant_v2.cpp"

template <typename S, typename Z, typename F>
static int Run(const QuantizeTilingData &td, void *x, void *scale, void *zero, void *y, uint64_t rows, uint32_t cols,
               uint64_t scaleLen, uint32_t ubBytes, uint32_t *keyOut, char *err, int errLen, F kernel)
{
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer, or the case is not supported");
        return 2;
    }
    uint64_t n = rows * cols;
    OPSDK_GM(x, n * sizeof(DTYPE_X), "x");
    OPSDK_GM(scale, scaleLen * sizeof(S), "scale");
    OPSDK_GM(zero, scaleLen * sizeof(Z), "zero_points");
    OPSDK_GM(y, td.outType == QUANT_OUT_INT32 ? 4 * n : td.outType == QUANT_OUT_INT4 ? n / 2 : n, "y");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, kernel);
}

// divMode 1: Quantize (x / scales); 0: AscendQuantV2 (x * scale). axDim / inner: the size of the
// scales' dim and the product of the dims between it and the last. sqrtMode / roundMode
// (QUANT_ROUND_*, 4: an unsupported mode): AscendQuantV2's attributes. outType: QUANT_OUT_*.
extern "C" int opsdk_run(int divMode, void *x, void *scale, void *zero, void *y, uint64_t rows, uint32_t cols,
                         uint64_t scaleLen, int64_t rank, int64_t axis, uint64_t axDim, uint64_t inner, int sqrtMode,
                         uint32_t roundMode, uint32_t outType, uint32_t coreNum, uint32_t ubBytes, uint32_t *keyOut,
                         char *err, int errLen)
{
    if (divMode) {
        QuantizeTilingData td = TilingQuantize(rows, cols, sizeof(DTYPE_X), scaleLen, zero != nullptr, rank, axis, axDim,
                                               inner, outType, coreNum, ubBytes);
        return Run<DTYPE_SCALES, DTYPE_ZERO_POINTS>(td, x, scale, zero, y, rows, cols, scaleLen, ubBytes, keyOut, err,
                                                    errLen, [&] {
            quantize((GM_ADDR)x, (GM_ADDR)scale, (GM_ADDR)zero, (GM_ADDR)y, nullptr, (GM_ADDR)&td);
        });
    }
    AscendQuantV2TilingData td = TilingAscendQuantV2(rows, cols, sizeof(DTYPE_X), scaleLen, zero != nullptr, rank, axis,
                                                     axDim, inner, sqrtMode != 0, roundMode, outType, coreNum,
                                                     ubBytes);
    return Run<DTYPE_SCALE, DTYPE_OFFSET>(td, x, scale, zero, y, rows, cols, scaleLen, ubBytes, keyOut, err, errLen, [&] {
        ascend_quant_v2((GM_ADDR)x, (GM_ADDR)scale, (GM_ADDR)zero, (GM_ADDR)y, nullptr, (GM_ADDR)&td);
    });
}
