// ctypes entry of the DynamicQuant and DynamicQuantV2 kernels (kernels/ascendc/dynamic_quant,
// dynamic_quant_v2) on the CPU model. -DDTYPE_X=half|bfloat16_t
#include "driver_common.h"
#include "dynamic_quant/op_kernel/dynamic_quant.cpp"
#include "dynamic_quant_v2/op_kernel/dynamic_quant_v2.cpp"

// v2 0: DynamicQuant (per token; offset unused), 1: DynamicQuantV2 (offset written).
// numGroups: group_index's length (0: none). quantMode: DQ_MODE_*. chanRows: size of dim -2.
// flags (DynamicQuantV2): bit 0 asymmetric, bit 1 a dst_type_max of 1 (else dstTypeMax).
// outType: OUT_INT8 (int8 / int4) or an 8-bit float output (y one byte per element); DynamicQuant
// takes its formats' largest values as DTYPE_MAX, DynamicQuantV2 dstTypeMax for hifloat8.
extern "C" int opsdk_run(int v2, void *x, void *smooth, void *group, void *y, void *scale, void *offset, uint64_t rows,
                         uint32_t cols, uint32_t numGroups, uint32_t quantMode, uint64_t chanRows, int int4Out,
                         int flags, uint32_t outType, float dstTypeMax, uint32_t coreNum, uint32_t ubBytes,
                         uint32_t *keyOut, char *err, int errLen)
{
    DynamicQuantTilingData td =
        v2 ? TilingDynamicQuantV2(rows, cols, sizeof(DTYPE_X), smooth != nullptr, numGroups, quantMode, chanRows,
                                  int4Out != 0, !(flags & 1), (flags & 2) ? 1.0f : dstTypeMax, coreNum, ubBytes,
                                  outType)
           : TilingDynamicQuant(rows, cols, sizeof(DTYPE_X), smooth != nullptr, numGroups, quantMode, chanRows,
                                int4Out != 0, coreNum, ubBytes, outType, DynamicQuantFloat8Max(outType, 0.0f));
    *keyOut = td.tilingKey;
    if (td.tilingKey == opsdk_ascendc::TILING_KEY_INVALID) {
        opsdk_driver::SetError(err, errLen, "tiling: no tiling fits the unified buffer, or the case is not supported");
        return 2;
    }
    uint64_t n = rows * cols;
    uint64_t scaleLen = quantMode == DQ_MODE_PER_TOKEN ? rows : quantMode == DQ_MODE_PER_TENSOR ? 1 : rows / chanRows * cols;
    uint64_t smoothLen = quantMode == DQ_MODE_PER_CHANNEL ? chanRows : (numGroups ? numGroups : 1) * uint64_t(cols);
    OPSDK_GM(x, n * sizeof(DTYPE_X), "x");
    OPSDK_GM(smooth, smoothLen * sizeof(DTYPE_X), "smooth_scales");
    OPSDK_GM(group, numGroups * sizeof(int32_t), "group_index");
    OPSDK_GM(y, int4Out ? n / 2 : n, "y");
    OPSDK_GM(scale, scaleLen * sizeof(float), "scale");
    OPSDK_GM(offset, scaleLen * sizeof(float), "offset");
    OPSDK_GM(&td, sizeof(td), "tiling");
    return opsdk_driver::RunBlocks(td.blockDim, ubBytes, err, errLen, [&] {
        if (v2) {
            dynamic_quant_v2((GM_ADDR)x, (GM_ADDR)smooth, (GM_ADDR)group, (GM_ADDR)y, (GM_ADDR)scale, (GM_ADDR)offset,
                             nullptr, (GM_ADDR)&td);
        } else {
            dynamic_quant((GM_ADDR)x, (GM_ADDR)smooth, (GM_ADDR)group, (GM_ADDR)y, (GM_ADDR)scale, nullptr,
                          (GM_ADDR)&td);
        }
    });
}

// The plain tiling function alone (DynamicQuantV2's, symmetric): the struct into *out; returns its size.
extern "C" int opsdk_tiling(uint64_t rows, uint32_t cols, int hasSmooth, uint32_t numGroups, uint32_t quantMode,
                            uint64_t chanRows, int int4Out, uint32_t coreNum, uint32_t ubBytes, DynamicQuantTilingData *out)
{
    *out = TilingDynamicQuantV2(rows, cols, sizeof(DTYPE_X), hasSmooth != 0, numGroups, quantMode, chanRows, int4Out != 0,
                                true, 0.0f, coreNum, ubBytes);
    return static_cast<int>(sizeof(DynamicQuantTilingData));
}
