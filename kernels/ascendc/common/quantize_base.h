// The kernel body of static quantisation, Quantize (DIV: y = x / scales) and AscendQuantV2
// (y = x * scale, or x * scale * scale with sqrt_mode): v = x (/ or *) s (+ z) in fp32,
// y = round(v) saturated to int8, uint8 or int4 (clamped in fp32 first, then fp32 -> int32 in
// the round mode: rint, floor, ceil or trunc -> half -> the output type; int4 packed two per
// byte, element 0 in the low nibble), or to int32 (fp32 -> int32 in the round mode, saturating). s / z per channel along the last dim (resident in
// fp32), per row (scales along another dim: row r takes value (r / chanInner) % chanCount,
// duplicated over the row and loaded again when it changes) or per tensor (one value,
// duplicated over a row). T: x; S: scales; Z: zero points / offset. Tiling keys
// (quantize/op_host/quantize_tiling.h): 1 whole rows per tile (double-buffered); 2 a row in
// chunks, s / z loaded per chunk.
#pragma once

#include "kernel_operator.h"
#include "kernel_common.h"
#include "row_kernel.h"
#include "../quantize/op_host/quantize_tiling.h"

namespace opsdk_ascendc {

template <typename T, typename S, typename Z, bool DIV>
class KernelQuantizeBase : public RowKernel<KernelQuantizeBase<T, S, Z, DIV>, QuantizeTilingData> {
    static constexpr int32_t BUFFER_NUM = 2;
    using Base = RowKernel<KernelQuantizeBase<T, S, Z, DIV>, QuantizeTilingData>;
    friend Base;
    using Base::td_;

public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR scale, GM_ADDR zero, GM_ADDR y, const QuantizeTilingData &td)
    {
        RowRange r = this->InitRows(td);
        rowStart_ = r.start;
        uint64_t n = td.numCols;
        uint64_t pn = td.perTensor ? 1 : td.perRow ? td.chanCount : n;
        xGm.SetGlobalBuffer((__gm__ T *)x + r.start * n, r.count * n);
        yGm.SetGlobalBuffer((__gm__ int8_t *)y + r.start * YBytes(n), r.count * YBytes(n));
        sGm.SetGlobalBuffer((__gm__ S *)scale, pn);
        if (td.hasZero) zGm.SetGlobalBuffer((__gm__ Z *)zero, pn);
        uint32_t work = this->TileCols();
        uint32_t rows = this->TileRows();
        pitchX_ = Align(work, 32 / sizeof(T));
        pitchY_ = Align(static_cast<uint32_t>(YBytes(work)), 32);
        pitchF_ = Align(work, 8);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, rows * pitchX_ * sizeof(T));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, rows * pitchY_);
        pipe.InitBuffer(sFpBuf, pitchF_ * sizeof(float));
        if (td.hasZero) pipe.InitBuffer(zFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(rawBuf, Align(work * 4, 32));
        pipe.InitBuffer(vFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(i32Buf, pitchF_ * sizeof(int32_t));
        pipe.InitBuffer(halfBuf, Align(work, 16) * sizeof(half));
        pipe.InitBuffer(scalarBuf, 32);
    }

private:
    // dst (fp32) = the parameter's columns col0 .. col0 + len (per channel) or its value `idx`
    // duplicated over len (per tensor: idx 0; per row: the row's channel)
    template <typename P>
    __aicore__ inline void LoadParam(TBuf<TPosition::VECCALC> &dst, const GlobalTensor<P> &src, uint64_t col0, uint32_t len,
                                     uint64_t idx)
    {
        LocalTensor<P> raw = rawBuf.Get<P>();
        LocalTensor<float> d = dst.Get<float>();
        if (td_.perTensor || td_.perRow) {
            LocalTensor<float> s = scalarBuf.Get<float>();
            LoadAndWait(raw, src[idx], 1);
            ToFloat(s, raw, 1);
            float v = ReadScalar(s);
            SetFlag<HardEvent::S_V>(0);
            WaitFlag<HardEvent::S_V>(0);
            Duplicate(d, v, static_cast<int32_t>(len));
        } else {
            LoadAndWait(raw, src[col0], len);
            ToFloat(d, raw, len);
        }
        PipeBarrier<PIPE_V>();
        SetFlag<HardEvent::V_MTE2>(0);  // the staging buffer is loaded again next
        WaitFlag<HardEvent::V_MTE2>(0);
    }

    // the scales' index of global row `row` (per row; 0 otherwise)
    __aicore__ inline uint64_t Channel(uint64_t row) const
    {
        return td_.perRow ? (row / td_.chanInner) % td_.chanCount : 0;
    }

    __aicore__ inline void LoadParams(uint64_t col0, uint32_t len, uint64_t idx)
    {
        LoadParam(sFpBuf, sGm, col0, len, idx);
        if (td_.hasZero) LoadParam(zFpBuf, zGm, col0, len, idx);
    }

    __aicore__ inline RoundMode Mode() const
    {
        switch (td_.roundMode) {
            case QUANT_ROUND_FLOOR: return RoundMode::CAST_FLOOR;
            case QUANT_ROUND_CEIL: return RoundMode::CAST_CEIL;
            case QUANT_ROUND_TRUNC: return RoundMode::CAST_TRUNC;
            default: return RoundMode::CAST_RINT;
        }
    }

    __aicore__ inline void QuantizeRow(const LocalTensor<int8_t> &y, const LocalTensor<T> &x, uint32_t n)
    {
        LocalTensor<float> v = vFpBuf.Get<float>();
        ToFloat(v, x, n);
        PipeBarrier<PIPE_V>();
        if constexpr (DIV) {
            Div(v, v, sFpBuf.Get<float>(), n);
        } else {
            Mul(v, v, sFpBuf.Get<float>(), n);
            if (td_.sqrtMode) {
                PipeBarrier<PIPE_V>();
                Mul(v, v, sFpBuf.Get<float>(), n);
            }
        }
        PipeBarrier<PIPE_V>();
        if (td_.hasZero) {
            Add(v, v, zFpBuf.Get<float>(), n);
            PipeBarrier<PIPE_V>();
        }
        ToOutput(y, v, n);
        PipeBarrier<PIPE_V>();
    }

    // bytes of y per n elements
    __aicore__ inline uint64_t YBytes(uint64_t n) const
    {
        return td_.outType == QUANT_OUT_INT32 ? 4 * n : td_.outType == QUANT_OUT_INT4 ? n / 2 : n;
    }

    // y (bytes) = v rounded in the mode and saturated to the output type; v is clamped in place
    __aicore__ inline void ToOutput(const LocalTensor<int8_t> &y, const LocalTensor<float> &v, uint32_t n)
    {
        LocalTensor<int32_t> i32 = i32Buf.Get<int32_t>();
        LocalTensor<half> h = halfBuf.Get<half>();
        if (td_.outType == QUANT_OUT_INT8) {
            SaturateToInt8(y, v, i32, h, n, Mode());
            return;
        }
        if (td_.outType == QUANT_OUT_INT32) {  // the Cast saturates to the int32 range
            Cast(y.template ReinterpretCast<int32_t>(), v, Mode(), n);
            return;
        }
        bool u8 = td_.outType == QUANT_OUT_UINT8;
        Maxs(v, v, u8 ? 0.0f : -8.0f, n);
        PipeBarrier<PIPE_V>();
        Mins(v, v, u8 ? 255.0f : 7.0f, n);
        PipeBarrier<PIPE_V>();
        Cast(i32, v, Mode(), n);
        PipeBarrier<PIPE_V>();
        SetDeqScale(static_cast<half>(1.0f));
        PipeBarrier<PIPE_V>();
        Cast(h, i32, RoundMode::CAST_ROUND, n);  // exact: |v| <= 255
        PipeBarrier<PIPE_V>();
        if (u8) {
            Cast(y.template ReinterpretCast<uint8_t>(), h, RoundMode::CAST_TRUNC, n);
        } else {
            Cast(y.template ReinterpretCast<int4b_t>(), h, RoundMode::CAST_TRUNC, n);
        }
    }

    // ---- key 1: s / z of the current channel resident in fp32 -----------------------------
    __aicore__ inline void BeginWholeRows()
    {
        chan_ = Channel(rowStart_);
        LoadParams(0, td_.numCols, chan_);
    }

    __aicore__ inline void WholeRows(uint64_t row0, uint32_t rows)
    {
        uint64_t off = row0 * td_.numCols;
        LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
        CopyRowsIn(xLocal, xGm[off], rows, td_.numCols);
        inQueueX.EnQue(xLocal);
        xLocal = inQueueX.DeQue<T>();
        LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
        for (uint32_t r = 0; r < rows; ++r) {
            uint64_t c = Channel(rowStart_ + row0 + r);
            if (c != chan_) {  // per row: the next scale (and zero point)
                chan_ = c;
                LoadParams(0, td_.numCols, chan_);
            }
            QuantizeRow(yLocal[r * pitchY_], xLocal[r * pitchX_], td_.numCols);
        }
        outQueueY.EnQue(yLocal);
        inQueueX.FreeTensor(xLocal);
        yLocal = outQueueY.DeQue<int8_t>();
        CopyRowsOut(yGm[row0 * YBytes(td_.numCols)], yLocal, rows, static_cast<uint32_t>(YBytes(td_.numCols)));
        outQueueY.FreeTensor(yLocal);
    }

    // ---- key 2 ---------------------------------------------------------------------------
    __aicore__ inline void SplitRow(uint64_t row)
    {
        for (uint32_t c = 0; c < td_.numChunks; ++c) {
            uint32_t len = this->ChunkLen(c);
            uint64_t col0 = this->ChunkCol(c);
            uint64_t off = row * td_.numCols + col0;
            LoadParams(col0, len, Channel(rowStart_ + row));
            LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
            CopyRowsIn(xLocal, xGm[off], 1, len);
            inQueueX.EnQue(xLocal);
            xLocal = inQueueX.DeQue<T>();
            LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
            QuantizeRow(yLocal, xLocal, len);
            outQueueY.EnQue(yLocal);
            inQueueX.FreeTensor(xLocal);
            yLocal = outQueueY.DeQue<int8_t>();
            CopyRowsOut(yGm[row * YBytes(td_.numCols) + YBytes(col0)], yLocal, 1, static_cast<uint32_t>(YBytes(len)));
            outQueueY.FreeTensor(yLocal);
        }
    }

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY;
    TBuf<TPosition::VECCALC> sFpBuf, zFpBuf, rawBuf, vFpBuf, i32Buf, halfBuf, scalarBuf;
    GlobalTensor<T> xGm;
    GlobalTensor<S> sGm;
    GlobalTensor<Z> zGm;
    GlobalTensor<int8_t> yGm;
    uint64_t rowStart_ = 0, chan_ = 0;
    uint32_t pitchX_ = 0, pitchY_ = 0, pitchF_ = 0;
};

}  // namespace opsdk_ascendc
