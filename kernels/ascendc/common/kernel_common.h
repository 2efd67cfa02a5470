// Kernel-side helpers shared by the kernels under kernels/ascendc/ (Ascend C).
#pragma once

#include "kernel_operator.h"
#include "tiling_common.h"

namespace opsdk_ascendc {

using namespace AscendC;

// n rounded up to a multiple of unit, and the number of units n spans (buffer sizes, in
// elements or bytes).
__aicore__ inline uint32_t Align(uint32_t n, uint32_t unit) { return (n + unit - 1) / unit * unit; }
__aicore__ inline uint32_t Ceil(uint32_t n, uint32_t unit) { return (n + unit - 1) / unit; }
// the work buffer ReduceSum / ReduceMax need over n fp32 elements, in bytes (the kernel side of
// the tiling's ReduceWorkBytes: one fp32 per 64-element repeat, in whole 32-byte blocks)
__aicore__ inline uint32_t ReduceWorkBufBytes(uint32_t n) { return Align(Ceil(n, 64), 8) * sizeof(float); }

struct RowRange {
    uint64_t start;
    uint64_t count;
};

// This block's rows: rowsPerBlock each, one more for the first formerBlocks blocks.
__aicore__ inline RowRange BlockRows(uint64_t rowsPerBlock, uint32_t formerBlocks)
{
    uint64_t b = static_cast<uint64_t>(GetBlockIdx());
    if (b < formerBlocks) return {b * (rowsPerBlock + 1), rowsPerBlock + 1};
    return {formerBlocks * (rowsPerBlock + 1) + (b - formerBlocks) * rowsPerBlock, rowsPerBlock};
}

// `rows` rows of `cols` elements, contiguous in GM, into the UB at a 32-byte row pitch.
template <typename T>
__aicore__ inline void CopyRowsIn(const LocalTensor<T> &dst, const GlobalTensor<T> &src, uint32_t rows, uint32_t cols)
{
    DataCopyExtParams p{static_cast<uint16_t>(rows), static_cast<uint32_t>(cols * sizeof(T)), 0, 0, 0};
    DataCopyPadExtParams<T> pad{false, 0, 0, T(0)};
    DataCopyPad(dst, src, p, pad);
}

// The inverse: UB rows at a 32-byte pitch out to contiguous GM rows.
template <typename T>
__aicore__ inline void CopyRowsOut(const GlobalTensor<T> &dst, const LocalTensor<T> &src, uint32_t rows, uint32_t cols)
{
    DataCopyExtParams p{static_cast<uint16_t>(rows), static_cast<uint32_t>(cols * sizeof(T)), 0, 0, 0};
    DataCopyPad(dst, src, p);
}

// Rows of two inputs (x1 and x2 of the add-norms) into their input queues.
template <typename T, typename Queue>
__aicore__ inline void CopyRowsInPair(Queue &q1, Queue &q2, const GlobalTensor<T> &a, const GlobalTensor<T> &b,
                                      uint32_t rows, uint32_t cols)
{
    LocalTensor<T> la = q1.template AllocTensor<T>();
    LocalTensor<T> lb = q2.template AllocTensor<T>();
    CopyRowsIn(la, a, rows, cols);
    CopyRowsIn(lb, b, rows, cols);
    q1.EnQue(la);
    q2.EnQue(lb);
}

// Up-cast to fp32 (exact); for fp32 inputs a copy.
template <typename T>
__aicore__ inline void ToFloat(const LocalTensor<float> &dst, const LocalTensor<T> &src, uint32_t count)
{
    if constexpr (IsSameType<T, float>::value) {
        Muls(dst, src, 1.0f, count);
    } else {
        Cast(dst, src, RoundMode::CAST_NONE, count);
    }
}

// Round fp32 to the output type (nearest even); for fp32 outputs a copy.
template <typename T>
__aicore__ inline void FromFloat(const LocalTensor<T> &dst, const LocalTensor<float> &src, uint32_t count)
{
    if constexpr (IsSameType<T, float>::value) {
        Muls(dst, src, 1.0f, count);
    } else {
        Cast(dst, src, RoundMode::CAST_RINT, count);
    }
}

// fp32 -> int8 with round half to even (or `mode`: CAST_FLOOR / CAST_CEIL / CAST_TRUNC) and
// saturation: fp32 -> int32 (the mode) -> half (exact for |v| <= 2048, SetDeqScale 1) -> int8
// (trunc of an integer, saturating). `tmpI32` and `tmpHalf` hold count elements.
__aicore__ inline void FloatToInt8(const LocalTensor<int8_t> &dst, const LocalTensor<float> &src,
                                   const LocalTensor<int32_t> &tmpI32, const LocalTensor<half> &tmpHalf, uint32_t count,
                                   RoundMode mode = RoundMode::CAST_RINT)
{
    Cast(tmpI32, src, mode, count);
    PipeBarrier<PIPE_V>();
    SetDeqScale(static_cast<half>(1.0f));
    PipeBarrier<PIPE_V>();
    Cast(tmpHalf, tmpI32, RoundMode::CAST_ROUND, count);
    PipeBarrier<PIPE_V>();
    Cast(dst, tmpHalf, RoundMode::CAST_TRUNC, count);
}

// fp32 -> int4 (two per byte, element 0 in the low nibble of byte 0) like FloatToInt8: the
// int32 -> half step must be exact (|src| <= 2048, as for a value already scaled to DMAX 7),
// then half -> int4b_t (trunc of an integer, saturating to [-8, 7]). dst holds count / 2 bytes.
__aicore__ inline void FloatToInt4(const LocalTensor<int8_t> &dst, const LocalTensor<float> &src,
                                   const LocalTensor<int32_t> &tmpI32, const LocalTensor<half> &tmpHalf, uint32_t count)
{
    Cast(tmpI32, src, RoundMode::CAST_RINT, count);
    PipeBarrier<PIPE_V>();
    SetDeqScale(static_cast<half>(1.0f));
    PipeBarrier<PIPE_V>();
    Cast(tmpHalf, tmpI32, RoundMode::CAST_ROUND, count);
    PipeBarrier<PIPE_V>();
    Cast(dst.ReinterpretCast<int4b_t>(), tmpHalf, RoundMode::CAST_TRUNC, count);
}

// fp32 -> int8 like FloatToInt8, saturated in fp32 first (clamped to [-128, 127], then the
// rounding; the same as rounding then clamping, the bounds being integers and every mode
// monotone), so that the int32 step stays exact whatever the magnitude of src. src is clamped
// in place.
__aicore__ inline void SaturateToInt8(const LocalTensor<int8_t> &dst, const LocalTensor<float> &src,
                                      const LocalTensor<int32_t> &tmpI32, const LocalTensor<half> &tmpHalf, uint32_t count,
                                      RoundMode mode = RoundMode::CAST_RINT)
{
    Maxs(src, src, -128.0f, count);
    PipeBarrier<PIPE_V>();
    Mins(src, src, 127.0f, count);
    PipeBarrier<PIPE_V>();
    FloatToInt8(dst, src, tmpI32, tmpHalf, count, mode);
}

// ---- 8-bit float outputs (Ascend 950) -----------------------------------------------------
// (the output codes OUT_* of the `outType` tiling fields: common/tiling_common.h)
// The 8-bit float element types exist on Ascend 950 (__NPU_ARCH__ 3510) and in the CPU model.
#if !defined(__CCE_AICORE__) || (defined(__NPU_ARCH__) && __NPU_ARCH__ == 3510)
#define OPSDK_FLOAT8_OUT 1
#endif

// fp32 -> an 8-bit float output, one Cast: float8_e5m2 / float8_e4m3fn round half to even
// (CAST_RINT), HiFloat8 half away from zero (CAST_ROUND); overflow saturates to the largest
// finite value (Cast's default overflow handling). dst holds count bytes.
__aicore__ inline void FloatToFloat8(const LocalTensor<int8_t> &dst, const LocalTensor<float> &src, uint32_t outType,
                                     uint32_t count)
{
#ifdef OPSDK_FLOAT8_OUT
    if (outType == OUT_FLOAT8_E5M2) {
        Cast(dst.ReinterpretCast<fp8_e5m2_t>(), src, RoundMode::CAST_RINT, count);
    } else if (outType == OUT_FLOAT8_E4M3FN) {
        Cast(dst.ReinterpretCast<fp8_e4m3fn_t>(), src, RoundMode::CAST_RINT, count);
    } else if (outType == OUT_HIFLOAT8) {
        Cast(dst.ReinterpretCast<hifloat8_t>(), src, RoundMode::CAST_ROUND, count);
    }
#else
    (void)dst, (void)src, (void)outType, (void)count;
#endif
}

// ---- per-token dynamic int8 quantisation (DynamicQuant and the fused norms) -------------
constexpr float DYNAMIC_QUANT_MAX = 127.0f;

// scale = amax / 127 (scalar fp32, as the reference divides)
__aicore__ inline float DynamicQuantScale(float amax) { return amax / DYNAMIC_QUANT_MAX; }

// inv = 127 / amax; 0 for an all-zero row (scale 0, y 0)
__aicore__ inline float DynamicQuantInverse(float amax) { return amax > 0.0f ? DYNAMIC_QUANT_MAX / amax : 0.0f; }

// y = int8(rint(v * inv)) saturated (int4: packed two per byte, inv then scales to DMAX 7);
// tmpF receives v * inv (may be v itself)
__aicore__ inline void DynamicQuantRow(const LocalTensor<int8_t> &y, const LocalTensor<float> &tmpF,
                                       const LocalTensor<float> &v, float inv, const LocalTensor<int32_t> &tmpI32,
                                       const LocalTensor<half> &tmpHalf, uint32_t count, bool int4 = false)
{
    Muls(tmpF, v, inv, count);
    PipeBarrier<PIPE_V>();
    if (int4) {
        FloatToInt4(y, tmpF, tmpI32, tmpHalf, count);
    } else {
        FloatToInt8(y, tmpF, tmpI32, tmpHalf, count);
    }
    PipeBarrier<PIPE_V>();
}

// The vector result dst[0] as a scalar (vector -> scalar sync).
template <typename T>
__aicore__ inline T ReadScalar(const LocalTensor<T> &t)
{
    SetFlag<HardEvent::V_S>(0);
    WaitFlag<HardEvent::V_S>(0);
    return t.GetValue(0);
}

// A synchronous GM -> UB load of a buffer the vector unit reads next (MTE2 -> V sync).
template <typename T>
__aicore__ inline void LoadAndWait(const LocalTensor<T> &dst, const GlobalTensor<T> &src, uint32_t cols)
{
    CopyRowsIn(dst, src, 1, cols);
    SetFlag<HardEvent::MTE2_V>(0);
    WaitFlag<HardEvent::MTE2_V>(0);
}

// max|src| over count elements as a scalar; absTmp receives |src|.
__aicore__ inline float AbsMax(const LocalTensor<float> &absTmp, const LocalTensor<float> &src,
                               const LocalTensor<float> &work, const LocalTensor<float> &scalar, uint32_t count)
{
    Abs(absTmp, src, count);
    PipeBarrier<PIPE_V>();
    ReduceMax(scalar, absTmp, work, count);
    return ReadScalar(scalar);
}

// xF = float(a) + float(b) in fp32 (the add of the add-norms); tmpF is scratch.
template <typename T>
__aicore__ inline void AddToFloat(const LocalTensor<float> &xF, const LocalTensor<float> &tmpF, const LocalTensor<T> &a,
                                  const LocalTensor<T> &b, uint32_t count)
{
    ToFloat(xF, a, count);
    ToFloat(tmpF, b, count);
    PipeBarrier<PIPE_V>();
    Add(xF, xF, tmpF, count);
    PipeBarrier<PIPE_V>();
}

// sum(xF^2) as a scalar (ReduceSum order: docs/ascendc.md); sq is scratch.
__aicore__ inline float SumSquares(const LocalTensor<float> &sq, const LocalTensor<float> &xF,
                                   const LocalTensor<float> &work, const LocalTensor<float> &scalar, uint32_t count)
{
    Mul(sq, xF, xF, count);
    PipeBarrier<PIPE_V>();
    ReduceSum(scalar, sq, work, count);
    return ReadScalar(scalar);
}

// rstd = 1 / sqrt(sum * avgFactor + eps), computed in t[0] by vector instructions; one is a
// scratch tensor of at least one element.
__aicore__ inline float RstdFromSum(const LocalTensor<float> &t, const LocalTensor<float> &one, float sum,
                                    float avgFactor, float eps)
{
    Duplicate(t, sum, 1);
    PipeBarrier<PIPE_V>();
    Muls(t, t, avgFactor, 1);
    PipeBarrier<PIPE_V>();
    Adds(t, t, eps, 1);
    PipeBarrier<PIPE_V>();
    Sqrt(t, t, 1);
    Duplicate(one, 1.0f, 1);
    PipeBarrier<PIPE_V>();
    Div(t, one, t, 1);
    return ReadScalar(t);
}

}  // namespace opsdk_ascendc
