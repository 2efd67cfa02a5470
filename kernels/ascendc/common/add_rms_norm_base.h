// The AddRmsNorm kernel body, shared by AddRmsNorm (y in T) and AddRmsNormCast (y in fp32
// and in T): x = x1 + x2 in fp32 (written rounded to T), rstd from the unrounded sum,
// y = (x * rstd) * gamma. Tiling keys as in add_rms_norm/op_host/add_rms_norm_tiling.h.
#pragma once

#include "kernel_operator.h"
#include "kernel_common.h"
#include "row_kernel.h"
#include "../add_rms_norm/op_host/add_rms_norm_tiling.h"

namespace opsdk_ascendc {

template <typename T, bool WITH_FP32_Y>
class KernelAddRmsNormBase : public RowKernel<KernelAddRmsNormBase<T, WITH_FP32_Y>, AddRmsNormTilingData> {
    static constexpr int32_t BUFFER_NUM = 2;
    using Base = RowKernel<KernelAddRmsNormBase<T, WITH_FP32_Y>, AddRmsNormTilingData>;
    friend Base;
    using Base::td_;
    using Base::ChunkLen;

public:
    // y32 is used only WITH_FP32_Y.
    __aicore__ inline void Init(GM_ADDR x1, GM_ADDR x2, GM_ADDR gamma, GM_ADDR y32, GM_ADDR y, GM_ADDR rstd, GM_ADDR x,
                                const AddRmsNormTilingData &td)
    {
        RowRange r = this->InitRows(td);
        uint64_t n = td.numCols;
        x1Gm.SetGlobalBuffer((__gm__ T *)x1 + r.start * n, r.count * n);
        x2Gm.SetGlobalBuffer((__gm__ T *)x2 + r.start * n, r.count * n);
        yGm.SetGlobalBuffer((__gm__ T *)y + r.start * n, r.count * n);
        xGm.SetGlobalBuffer((__gm__ T *)x + r.start * n, r.count * n);
        if constexpr (WITH_FP32_Y) y32Gm.SetGlobalBuffer((__gm__ float *)y32 + r.start * n, r.count * n);
        rstdGm.SetGlobalBuffer((__gm__ float *)rstd + r.start, r.count);
        gammaGm.SetGlobalBuffer((__gm__ T *)gamma, n);
        uint32_t work = this->TileCols();
        uint32_t rows = this->TileRows();
        pitch_ = Align(work, 32 / sizeof(T));
        pitchF_ = Align(work, 8);
        pipe.InitBuffer(inQueueX1, BUFFER_NUM, rows * pitch_ * sizeof(T));
        pipe.InitBuffer(inQueueX2, BUFFER_NUM, rows * pitch_ * sizeof(T));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, rows * pitch_ * sizeof(T));
        pipe.InitBuffer(outQueueX, BUFFER_NUM, rows * pitch_ * sizeof(T));
        if constexpr (WITH_FP32_Y) pipe.InitBuffer(outQueueY32, BUFFER_NUM, rows * pitchF_ * sizeof(float));
        pipe.InitBuffer(outQueueRstd, BUFFER_NUM, rows * sizeof(float));
        pipe.InitBuffer(gammaBuf, pitch_ * sizeof(T));
        pipe.InitBuffer(gammaFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(xFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(sqBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(reduceWorkBuf, ReduceWorkBufBytes(work));
        pipe.InitBuffer(scalarBuf, 32);
        pipe.InitBuffer(oneBuf, 32);
    }

private:
    // ---- key 1: gamma resident in fp32 -----------------------------------------------------
    __aicore__ inline void BeginWholeRows()
    {
        LocalTensor<T> g = gammaBuf.Get<T>();
        LoadAndWait(g, gammaGm, td_.numCols);
        ToFloat(gammaFpBuf.Get<float>(), g, td_.numCols);
        PipeBarrier<PIPE_V>();
    }

    __aicore__ inline void WholeRows(uint64_t row0, uint32_t rows)
    {
        CopyIn(row0 * td_.numCols, rows, td_.numCols);
        Compute(rows, gammaFpBuf.Get<float>());
        CopyOut(row0, rows);
    }

    __aicore__ inline void CopyIn(uint64_t offset, uint32_t rows, uint32_t cols)
    {
        CopyRowsInPair(inQueueX1, inQueueX2, x1Gm[offset], x2Gm[offset], rows, cols);
    }

    // xF = x1 + x2 (fp32) of the row at a / b, and x (rounded) into xOut
    __aicore__ inline void AddRow(const LocalTensor<T> &xOut, const LocalTensor<T> &a, const LocalTensor<T> &b, uint32_t n)
    {
        LocalTensor<float> xF = xFpBuf.Get<float>();
        AddToFloat(xF, sqBuf.Get<float>(), a, b, n);
        FromFloat(xOut, xF, n);
        PipeBarrier<PIPE_V>();
    }

    __aicore__ inline void Compute(uint32_t rows, const LocalTensor<float> &gF)
    {
        LocalTensor<T> a = inQueueX1.DeQue<T>();
        LocalTensor<T> b = inQueueX2.DeQue<T>();
        LocalTensor<T> yLocal = outQueueY.AllocTensor<T>();
        LocalTensor<T> xLocal = outQueueX.AllocTensor<T>();
        LocalTensor<float> rstdLocal = outQueueRstd.AllocTensor<float>();
        LocalTensor<float> y32Local;
        if constexpr (WITH_FP32_Y) y32Local = outQueueY32.template AllocTensor<float>();
        LocalTensor<float> xF = xFpBuf.Get<float>();
        uint32_t n = td_.numCols;
        for (uint32_t r = 0; r < rows; ++r) {
            AddRow(xLocal[r * pitch_], a[r * pitch_], b[r * pitch_], n);
            float rstd = Rstd(SumSquares(xF, n));
            rstdLocal.SetValue(r, rstd);
            if constexpr (WITH_FP32_Y) {
                Normalize(yLocal[r * pitch_], y32Local[r * pitchF_], xF, gF, rstd, n);
            } else {
                Normalize(yLocal[r * pitch_], xF, xF, gF, rstd, n);
            }
        }
        outQueueY.EnQue(yLocal);
        outQueueX.EnQue(xLocal);
        outQueueRstd.EnQue(rstdLocal);
        if constexpr (WITH_FP32_Y) outQueueY32.EnQue(y32Local);
        inQueueX1.FreeTensor(a);
        inQueueX2.FreeTensor(b);
    }

    __aicore__ inline void CopyOut(uint64_t row0, uint32_t rows)
    {
        uint64_t off = row0 * td_.numCols;
        LocalTensor<T> yLocal = outQueueY.DeQue<T>();
        LocalTensor<T> xLocal = outQueueX.DeQue<T>();
        LocalTensor<float> rstdLocal = outQueueRstd.DeQue<float>();
        SetFlag<HardEvent::S_MTE3>(0);  // rstd was written by the scalar unit
        WaitFlag<HardEvent::S_MTE3>(0);
        CopyRowsOut(yGm[off], yLocal, rows, td_.numCols);
        CopyRowsOut(xGm[off], xLocal, rows, td_.numCols);
        CopyRowsOut(rstdGm[row0], rstdLocal, 1, rows);
        if constexpr (WITH_FP32_Y) {
            LocalTensor<float> y32Local = outQueueY32.template DeQue<float>();
            CopyRowsOut(y32Gm[off], y32Local, rows, td_.numCols);
            outQueueY32.FreeTensor(y32Local);
        }
        outQueueY.FreeTensor(yLocal);
        outQueueX.FreeTensor(xLocal);
        outQueueRstd.FreeTensor(rstdLocal);
    }

    // ---- key 2 ---------------------------------------------------------------------------
    __aicore__ inline void SplitRow(uint64_t row)
    {
        LocalTensor<float> xF = xFpBuf.Get<float>();
        LocalTensor<T> g = gammaBuf.Get<T>();
        LocalTensor<float> gF = gammaFpBuf.Get<float>();
        float sum = 0.0f;  // chunk sums added in chunk order
        for (uint32_t c = 0; c < td_.numChunks; ++c) {  // pass 1: x out, sum of squares
            uint32_t len = ChunkLen(c);
            uint64_t off = this->ChunkOffset(row, c);
            CopyIn(off, 1, len);
            LocalTensor<T> a = inQueueX1.DeQue<T>();
            LocalTensor<T> b = inQueueX2.DeQue<T>();
            LocalTensor<T> xLocal = outQueueX.AllocTensor<T>();
            AddRow(xLocal, a, b, len);
            inQueueX1.FreeTensor(a);
            inQueueX2.FreeTensor(b);
            outQueueX.EnQue(xLocal);
            sum += SumSquares(xF, len);
            xLocal = outQueueX.DeQue<T>();
            CopyRowsOut(xGm[off], xLocal, 1, len);
            outQueueX.FreeTensor(xLocal);
        }
        float rstd = Rstd(sum);
        for (uint32_t c = 0; c < td_.numChunks; ++c) {  // pass 2: the sum again, normalised
            uint32_t len = ChunkLen(c);
            uint64_t col0 = this->ChunkCol(c);
            uint64_t off = row * td_.numCols + col0;
            LoadAndWait(g, gammaGm[col0], len);
            ToFloat(gF, g, len);
            CopyIn(off, 1, len);
            LocalTensor<T> a = inQueueX1.DeQue<T>();
            LocalTensor<T> b = inQueueX2.DeQue<T>();
            LocalTensor<T> xTmp = outQueueY.AllocTensor<T>();  // x rounded: not written again
            AddRow(xTmp, a, b, len);
            inQueueX1.FreeTensor(a);
            inQueueX2.FreeTensor(b);
            LocalTensor<T> yLocal = xTmp;
            if constexpr (WITH_FP32_Y) {
                LocalTensor<float> y32Local = outQueueY32.template AllocTensor<float>();
                Normalize(yLocal, y32Local, xF, gF, rstd, len);
                outQueueY32.EnQue(y32Local);
                y32Local = outQueueY32.template DeQue<float>();
                CopyRowsOut(y32Gm[off], y32Local, 1, len);
                outQueueY32.FreeTensor(y32Local);
            } else {
                Normalize(yLocal, xF, xF, gF, rstd, len);
            }
            outQueueY.EnQue(yLocal);
            yLocal = outQueueY.DeQue<T>();
            CopyRowsOut(yGm[off], yLocal, 1, len);
            outQueueY.FreeTensor(yLocal);
        }
        WriteScalarOut(outQueueRstd, rstdGm[row], rstd);
    }

    // ---- shared steps --------------------------------------------------------------------
    __aicore__ inline float SumSquares(const LocalTensor<float> &xF, uint32_t n)
    {
        return opsdk_ascendc::SumSquares(sqBuf.Get<float>(), xF, reduceWorkBuf.Get<float>(), scalarBuf.Get<float>(), n);
    }

    __aicore__ inline float Rstd(float sum)
    {
        return RstdFromSum(scalarBuf.Get<float>(), oneBuf.Get<float>(), sum, td_.avgFactor, td_.epsilon);
    }

    // yF = (xF * rstd) * gamma in fp32 (yF may be xF), y = yF rounded to T
    __aicore__ inline void Normalize(const LocalTensor<T> &y, const LocalTensor<float> &yF, const LocalTensor<float> &xF,
                                     const LocalTensor<float> &gF, float rstd, uint32_t n)
    {
        Muls(yF, xF, rstd, n);
        PipeBarrier<PIPE_V>();
        Mul(yF, yF, gF, n);
        PipeBarrier<PIPE_V>();
        FromFloat(y, yF, n);
        PipeBarrier<PIPE_V>();
    }

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX1, inQueueX2;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY, outQueueX, outQueueY32, outQueueRstd;
    TBuf<TPosition::VECCALC> gammaBuf, gammaFpBuf, xFpBuf, sqBuf, reduceWorkBuf, scalarBuf, oneBuf;
    GlobalTensor<T> x1Gm, x2Gm, gammaGm, yGm, xGm;
    GlobalTensor<float> y32Gm, rstdGm;
    uint32_t pitch_ = 0, pitchF_ = 0;
};

}  // namespace opsdk_ascendc
