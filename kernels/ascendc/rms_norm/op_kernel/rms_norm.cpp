// RmsNorm (npu_rms_norm) for the vector cores: y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps).
// x: (numRows, numCols) in T (half, bfloat16_t or float); gamma: (numCols) in TG; y like x;
// rstd: (numRows) float. All arithmetic in fp32; y rounded once (nearest even).
// Tiling keys (op_host/rms_norm_tiling.h):
//   1 (whole row): rowsPerLoop rows per tile, double-buffered, gamma resident in fp32;
//   2 (split row): a row too long for the unified buffer, in chunkCols chunks: a first pass
//      sums the squares, a second pass normalises (x and gamma read twice).
#include "kernel_operator.h"
#include "../../common/kernel_common.h"
#include "../../common/row_kernel.h"
#include "../op_host/rms_norm_tiling.h"

namespace {
using namespace AscendC;
using namespace opsdk_ascendc;

constexpr int32_t BUFFER_NUM = 2;

template <typename T, typename TG>
class KernelRmsNorm : public RowKernel<KernelRmsNorm<T, TG>, RmsNormTilingData> {
    using Base = RowKernel<KernelRmsNorm<T, TG>, RmsNormTilingData>;
    friend Base;
    using Base::td_;
    using Base::rowCount_;
    using Base::ChunkLen;

public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR gamma, GM_ADDR y, GM_ADDR rstd, const RmsNormTilingData &td)
    {
        RowRange r = this->InitRows(td);
        uint64_t n = td.numCols;
        xGm.SetGlobalBuffer((__gm__ T *)x + r.start * n, r.count * n);
        yGm.SetGlobalBuffer((__gm__ T *)y + r.start * n, r.count * n);
        rstdGm.SetGlobalBuffer((__gm__ float *)rstd + r.start, r.count);
        gammaGm.SetGlobalBuffer((__gm__ TG *)gamma, n);
        // the fp32 working length: a whole row, or one chunk
        work_ = this->TileCols();
        uint32_t rows = this->TileRows();
        pitchX_ = Align(work_, 32 / sizeof(T));
        pipe.InitBuffer(inQueueX, BUFFER_NUM, rows * pitchX_ * sizeof(T));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, rows * pitchX_ * sizeof(T));
        pipe.InitBuffer(outQueueRstd, BUFFER_NUM, rows * sizeof(float));
        pipe.InitBuffer(gammaBuf, Align(work_, 32 / sizeof(TG)) * sizeof(TG));
        pipe.InitBuffer(gammaFpBuf, Align(work_, 8) * sizeof(float));
        pipe.InitBuffer(xFpBuf, Align(work_, 8) * sizeof(float));
        pipe.InitBuffer(sqBuf, Align(work_, 8) * sizeof(float));
        pipe.InitBuffer(reduceWorkBuf, ReduceWorkBufBytes(work_));
        pipe.InitBuffer(scalarBuf, 32);
        pipe.InitBuffer(oneBuf, 32);
    }

private:
    // ---- key 1: whole rows, gamma resident in fp32 ---------------------------------------
    __aicore__ inline void BeginWholeRows()
    {
        LocalTensor<TG> g = gammaBuf.Get<TG>();
        LoadAndWait(g, gammaGm, td_.numCols);
        ToFloat(gammaFpBuf.Get<float>(), g, td_.numCols);
        PipeBarrier<PIPE_V>();
    }

    __aicore__ inline void WholeRows(uint64_t row0, uint32_t rows)
    {
        CopyIn(row0, rows);
        Compute(rows, gammaFpBuf.Get<float>());
        CopyOut(row0, rows);
    }

    __aicore__ inline void CopyIn(uint64_t row0, uint32_t rows)
    {
        LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
        CopyRowsIn(xLocal, xGm[row0 * td_.numCols], rows, td_.numCols);
        inQueueX.EnQue(xLocal);
    }

    __aicore__ inline void Compute(uint32_t rows, const LocalTensor<float> &gF)
    {
        LocalTensor<T> xLocal = inQueueX.DeQue<T>();
        LocalTensor<T> yLocal = outQueueY.AllocTensor<T>();
        LocalTensor<float> rstdLocal = outQueueRstd.AllocTensor<float>();
        LocalTensor<float> xF = xFpBuf.Get<float>();
        uint32_t n = td_.numCols;
        for (uint32_t r = 0; r < rows; ++r) {
            ToFloat(xF, xLocal[r * pitchX_], n);
            PipeBarrier<PIPE_V>();
            float rstd = RowRstd(SumSquares(xF, n));
            rstdLocal.SetValue(r, rstd);
            Normalize(yLocal[r * pitchX_], xF, gF, rstd, n);
        }
        outQueueY.EnQue(yLocal);
        outQueueRstd.EnQue(rstdLocal);
        inQueueX.FreeTensor(xLocal);
    }

    __aicore__ inline void CopyOut(uint64_t row0, uint32_t rows)
    {
        LocalTensor<T> yLocal = outQueueY.DeQue<T>();
        LocalTensor<float> rstdLocal = outQueueRstd.DeQue<float>();
        SetFlag<HardEvent::S_MTE3>(0);  // rstd was written by the scalar unit
        WaitFlag<HardEvent::S_MTE3>(0);
        CopyRowsOut(yGm[row0 * td_.numCols], yLocal, rows, td_.numCols);
        CopyRowsOut(rstdGm[row0], rstdLocal, 1, rows);
        outQueueY.FreeTensor(yLocal);
        outQueueRstd.FreeTensor(rstdLocal);
    }

    // ---- key 2: one row at a time, in chunks ---------------------------------------------
    __aicore__ inline void SplitRow(uint64_t row)
    {
        LocalTensor<float> xF = xFpBuf.Get<float>();
        LocalTensor<TG> g = gammaBuf.Get<TG>();
        LocalTensor<float> gF = gammaFpBuf.Get<float>();
        float sum = 0.0f;  // chunk sums added in chunk order (docs/ascendc.md)
        for (uint32_t c = 0; c < td_.numChunks; ++c) {
            uint32_t len = ChunkLen(c);
            LoadChunk(row, c, len);
            LocalTensor<T> xLocal = inQueueX.DeQue<T>();
            ToFloat(xF, xLocal, len);
            inQueueX.FreeTensor(xLocal);
            PipeBarrier<PIPE_V>();
            sum += SumSquares(xF, len);
        }
        float rstd = RowRstd(sum);
        for (uint32_t c = 0; c < td_.numChunks; ++c) {
            uint32_t len = ChunkLen(c);
            uint64_t col0 = this->ChunkCol(c);
            LoadChunk(row, c, len);
            LoadAndWait(g, gammaGm[col0], len);
            ToFloat(gF, g, len);
            LocalTensor<T> xLocal = inQueueX.DeQue<T>();
            ToFloat(xF, xLocal, len);
            inQueueX.FreeTensor(xLocal);
            PipeBarrier<PIPE_V>();
            LocalTensor<T> yLocal = outQueueY.AllocTensor<T>();
            Normalize(yLocal, xF, gF, rstd, len);
            outQueueY.EnQue(yLocal);
            yLocal = outQueueY.DeQue<T>();
            CopyRowsOut(yGm[row * td_.numCols + col0], yLocal, 1, len);
            outQueueY.FreeTensor(yLocal);
        }
        WriteScalarOut(outQueueRstd, rstdGm[row], rstd);
    }

    __aicore__ inline void LoadChunk(uint64_t row, uint32_t c, uint32_t len)
    {
        LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
        CopyRowsIn(xLocal, xGm[this->ChunkOffset(row, c)], 1, len);
        inQueueX.EnQue(xLocal);
    }

    // ---- shared steps --------------------------------------------------------------------
    __aicore__ inline float SumSquares(const LocalTensor<float> &xF, uint32_t n)
    {
        LocalTensor<float> sq = sqBuf.Get<float>();
        LocalTensor<float> s = scalarBuf.Get<float>();
        LocalTensor<float> w = reduceWorkBuf.Get<float>();
        Mul(sq, xF, xF, n);
        PipeBarrier<PIPE_V>();
        ReduceSum(s, sq, w, n);
        return ReadScalar(s);
    }

    __aicore__ inline float RowRstd(float sum)
    {
        return RstdFromSum(scalarBuf.Get<float>(), oneBuf.Get<float>(), sum, td_.avgFactor, td_.epsilon);
    }

    // y = (x * rstd) * gamma, rounded to T
    __aicore__ inline void Normalize(const LocalTensor<T> &y, const LocalTensor<float> &xF, const LocalTensor<float> &gF,
                                     float rstd, uint32_t n)
    {
        Muls(xF, xF, rstd, n);
        PipeBarrier<PIPE_V>();
        Mul(xF, xF, gF, n);
        PipeBarrier<PIPE_V>();
        FromFloat(y, xF, n);
        PipeBarrier<PIPE_V>();
    }

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueRstd;
    TBuf<TPosition::VECCALC> gammaBuf, gammaFpBuf, xFpBuf, sqBuf, reduceWorkBuf, scalarBuf, oneBuf;
    GlobalTensor<T> xGm, yGm;
    GlobalTensor<TG> gammaGm;
    GlobalTensor<float> rstdGm;
    uint32_t work_ = 0, pitchX_ = 0;
};
}  // namespace

#ifndef DTYPE_X
#define DTYPE_X half
#endif
#ifndef DTYPE_GAMMA
#define DTYPE_GAMMA DTYPE_X
#endif

extern "C" __global__ __aicore__ void rms_norm(GM_ADDR x, GM_ADDR gamma, GM_ADDR y, GM_ADDR rstd, GM_ADDR workspace,
                                                GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(RmsNormTilingData);
    GET_TILING_DATA_WITH_STRUCT(RmsNormTilingData, tilingData, tiling);
    (void)workspace;
    KernelRmsNorm<DTYPE_X, DTYPE_GAMMA> op;
    op.Init(x, gamma, y, rstd, tilingData);
    op.Process();
}
