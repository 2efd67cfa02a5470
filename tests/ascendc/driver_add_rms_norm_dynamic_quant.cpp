// ctypes entry of the AddRmsNormDynamicQuant kernel (kernels/ascendc/add_rms_norm_dynamic_quant)
// on the CPU model. -DDTYPE_X1=half|bfloat16_t. mask: -1 no output_mask, else bit 0 / bit 1;
// bit 8 of mask: int4 outputs; bits 9..10: the 8-bit float output (OUT_*, 0: int8 / int4).
#include "driver_common.h"
#include "add_rms_norm_dynamic_quant/op_kernel/add_rms_norm_dynamic_quant.cpp"

static AddRmsNormDynamicQuantTilingData Tiling(uint64_t rows, uint32_t cols, float eps, const void *smooth1,
                                               const void *smooth2, const void *beta, int mask, uint32_t coreNum,
                                               uint32_t ubBytes)
{
    bool int4 = mask >= 0 && (mask & 256);
    uint32_t outType = mask >= 0 ? static_cast<uint32_t>((mask >> 9) & 3) : 0;
    int m = mask >= 0 ? (mask & 255) : mask;
    bool hasMask = m >= 0 && m != 255;  // 255: int4 without an output_mask
    return TilingAddRmsNormDynamicQuant(rows, cols, sizeof(DTYPE_X1), eps, smooth1 != nullptr, smooth2 != nullptr,
                                        beta != nullptr, hasMask, hasMask && (m & 1), hasMask && (m & 2), int4, coreNum,
                                        ubBytes, outType);
}

extern "C" int opsdk_tiling(uint64_t rows, uint32_t cols, float eps, void *smooth1, void *smooth2, void *beta, int mask,
                            uint32_t coreNum, uint32_t ubBytes, AddRmsNormDynamicQuantTilingData *out)
{
    *out = Tiling(rows, cols, eps, smooth1, smooth2, beta, mask, coreNum, ubBytes);
    return static_cast<int>(sizeof(AddRmsNormDynamicQuantTilingData));
}

extern "C" int opsdk_run(void *x1, void *x2, void *gamma, void *smooth1, void *smooth2, void *beta, void *y1, void *y2,
                         void *x, void *scale1, void *scale2, uint64_t rows, uint32_t cols, float eps, int mask,
                         uint32_t coreNum, uint32_t ubBytes, uint32_t *keyOut, char *err, int errLen)
{
    AddRmsNormDynamicQuantTilingData td = Tiling(rows, cols, eps, smooth1, smooth2, beta, mask, coreNum, ubBytes);
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer, or the output_mask is rejected");
        return 2;
    }
    uint64_t n = rows * cols;
    OPSDK_GM(x1, n * sizeof(DTYPE_X1), "x1");
    OPSDK_GM(x2, n * sizeof(DTYPE_X1), "x2");
    OPSDK_GM(gamma, cols * sizeof(DTYPE_X1), "gamma");
    OPSDK_GM(smooth1, cols * sizeof(DTYPE_X1), "smooth_scale1");
    OPSDK_GM(smooth2, cols * sizeof(DTYPE_X1), "smooth_scale2");
    OPSDK_GM(beta, cols * sizeof(DTYPE_X1), "beta");
    OPSDK_GM(x, n * sizeof(DTYPE_X1), "x");
    uint64_t yn = td.int4Out ? n / 2 : n;
    if (td.run1) OPSDK_GM(y1, yn, "y1");
    if (td.run1) OPSDK_GM(scale1, rows * sizeof(float), "scale1");
    if (td.run2) OPSDK_GM(y2, yn, "y2");
    if (td.run2) OPSDK_GM(scale2, rows * sizeof(float), "scale2");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {
        add_rms_norm_dynamic_quant((GM_ADDR)x1, (GM_ADDR)x2, (GM_ADDR)gamma, (GM_ADDR)smooth1, (GM_ADDR)smooth2,
                                   (GM_ADDR)beta, (GM_ADDR)y1, (GM_ADDR)y2, (GM_ADDR)x, (GM_ADDR)scale1,
                                   (GM_ADDR)scale2, nullptr, (GM_ADDR)&td);
    });
}
