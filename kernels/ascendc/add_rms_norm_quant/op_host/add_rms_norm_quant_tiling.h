// Tiling of AddRmsNormQuant (npu_add_rms_norm_quant, static int8 / float8 / hifloat8 quantisation) and, through
// add_rms_norm_dynamic_quant_tiling.h, of AddRmsNormDynamicQuant (per-token dynamic int8 / int4):
// x = x1 + x2 (fp32), rstd = 1 / sqrt(mean(x^2) + eps), y = x * rstd * gamma (+ beta) in fp32,
// then one or two quantisation branches of y, over numCols = numel(gamma) elements of each of
// numRows rows. Kernel body: common/add_rms_norm_quant_base.h.
#pragma once

#include <cstdint>

#include "../../common/tiling_common.h"

struct AddRmsNormQuantTilingData {
    OPSDK_ROW_TILING_FIELDS;
    float epsilon;
    float avgFactor;        // 1 / numCols
    uint32_t hasBeta;
    uint32_t run1;          // branch 1 writes y1 (dynamic: and scale1)
    uint32_t run2;          // branch 2 writes y2 (dynamic: and scale2); static: always 1
    uint32_t hasScale1;     // static: scales1 (always); dynamic: smooth_scale1
    uint32_t hasScale2;     // static: scales2 (without it y2 is all zeros); dynamic: smooth_scale2
    uint32_t hasZero1;      // static only: zero_points1
    uint32_t hasZero2;      // static only: zero_points2
    uint32_t divMode;       // static only: 1 y / scales, 0 y * scales
    uint32_t int4Out;       // dynamic only: y1 / y2 int4, two per byte (element 0 in the low nibble)
    uint32_t outType;       // OUT_INT8 (int8 / dynamic int4), OUT_FLOAT8_E5M2, OUT_FLOAT8_E4M3FN, OUT_HIFLOAT8
};

#ifndef __CCE_AICORE__
struct AddRmsNormQuantFeatures {
    bool dynamic;  // per-token dynamic quantisation (scale outputs) instead of static scales
    bool hasBeta, run1, run2, hasScale1, hasScale2, hasZero1, hasZero2, divMode;
    bool int4Out = false;  // dynamic only: int4 outputs (numCols a multiple of 8)
    uint32_t outType = 0;  // OUT_* (tiling_common.h; larger, or an 8-bit float with int4Out: key 0)
};

// xSize: element bytes of x1 / x2 / gamma / beta / x (2 or 4). The staging buffer of the
// per-column inputs is counted at 4 bytes per element (the largest of their dtypes).
inline AddRmsNormQuantTilingData TilingAddRmsNormQuantCommon(uint64_t numRows, uint32_t numCols, uint32_t xSize,
                                                             float epsilon, const AddRmsNormQuantFeatures &f,
                                                             uint32_t coreNum, uint32_t ubSize)
{
    using namespace opsdk_ascendc;
    AddRmsNormQuantTilingData t{};
    BlockSplit s = SetRowSplit(t, numRows, numCols, coreNum);
    t.epsilon = epsilon;
    t.avgFactor = numCols ? 1.0f / static_cast<float>(numCols) : 0.0f;
    t.hasBeta = f.hasBeta;
    t.run1 = f.run1;
    t.run2 = f.run2;
    t.hasScale1 = f.hasScale1;
    t.hasScale2 = f.hasScale2;
    t.hasZero1 = f.dynamic ? 0 : f.hasZero1;
    t.hasZero2 = f.dynamic ? 0 : f.hasZero2;
    t.divMode = f.dynamic ? 0 : f.divMode;
    t.int4Out = f.dynamic && f.int4Out ? 1 : 0;
    t.outType = f.outType;
    if (numCols == 0 || !(f.run1 || f.run2) || (t.int4Out && numCols % 8 != 0) || t.outType > OUT_HIFLOAT8 ||
        (t.int4Out && t.outType != OUT_INT8))
        return t;
    auto yBytes = [&](uint64_t n) { return t.int4Out ? n / 2 : n; };
    uint64_t params = 1 + t.hasBeta + t.hasScale1 + t.hasScale2 + t.hasZero1 + t.hasZero2;  // fp32, resident
    uint64_t outs = (f.run1 ? 1 : 0) + (f.run2 ? 1 : 0);
    auto fixed = [&](uint64_t n) {  // params in fp32, their staging, x / v / int32 in fp32, half tmp, work, 2 scalars
        return params * AlignElems(n, 4) * 4 + AlignBytes(n * 4) + 3 * AlignElems(n, 4) * 4 + AlignElems(n, 2) * 2 +
               ReduceWorkBytes(n) + 2 * BLOCK_BYTES;
    };
    auto whole = [&](uint64_t rows) {  // x1, x2 in; x out; y1 / y2 out; dynamic scales out (all double-buffered)
        return fixed(numCols) + 3 * 2 * rows * AlignElems(numCols, xSize) * xSize +
               outs * 2 * rows * AlignBytes(yBytes(numCols)) +
               (f.dynamic ? outs * 2 * AlignBytes(rows * 4) : 0);
    };
    auto split = [&](uint64_t n) {
        return fixed(n) + 3 * 2 * n * xSize + outs * 2 * yBytes(n) + (f.dynamic ? outs * 2 * BLOCK_BYTES : 0);
    };
    ChooseRowTile(t, ubSize, MaxBlockRows(s), whole, split);
    return t;
}

// AddRmsNormQuant: y1 from scales1 (+ zero_points1); y2 from scales2 (+ zero_points2), all
// zeros without scales2. axis must be -1 (the tiling returns key 0 otherwise). outType: the
// output (0 int8; 1 float8_e5m2, 2 float8_e4m3fn, 3 hifloat8: Ascend 950's dst_types).
inline AddRmsNormQuantTilingData TilingAddRmsNormQuant(uint64_t numRows, uint32_t numCols, uint32_t xSize, float epsilon,
                                                       bool hasScales2, bool hasZeroPoints1, bool hasZeroPoints2,
                                                       bool hasBeta, bool divMode, int64_t axis, uint32_t coreNum,
                                                       uint32_t ubSize, uint32_t outType = 0)
{
    AddRmsNormQuantFeatures f{false, hasBeta, true, true, true, hasScales2, hasZeroPoints1,
                              hasScales2 && hasZeroPoints2, divMode};
    f.outType = outType;
    AddRmsNormQuantTilingData t = TilingAddRmsNormQuantCommon(numRows, numCols, xSize, epsilon, f, coreNum, ubSize);
    if (axis != -1) t.tilingKey = opsdk_ascendc::TILING_KEY_INVALID;
    return t;
}
#endif
