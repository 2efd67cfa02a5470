// RmsNormRope (op_sdk::rms_norm_rope) for the vector cores: per row of D elements,
// t = x * rstd * gamma rounded to T (npu_rms_norm's y), then
// y = [t1 * cos1 - t2 * sin1, t2 * cos2 + t1 * sin2] over the halves t1 | t2, in fp32, rounded once.
// T: half, bfloat16_t or float; TG: gamma's type (T, or float for half / bfloat16_t x).
// Tiling key 1 only (op_host/rms_norm_tiling.h): rowsPerLoop whole rows per tile, each row's
// two halves in their own 32-byte-aligned blocks (one DataCopyPad of 2 blocks per row), so
// every vector operand starts aligned whatever D is; gamma's halves resident in fp32; a row's
// cos / sin row found from its leading indices (cosRowStride).
#include "kernel_operator.h"
#include "common/kernel_common.h"
#include "common/row_kernel.h"
#include "../op_host/rms_norm_rope_tiling.h"

namespace {
using namespace AscendC;
using namespace opsdk_ascendc;

constexpr int32_t BUFFER_NUM = 2;

template <typename T, typename TG>
class KernelRmsNormRope : public RowKernel<KernelRmsNormRope<T, TG>, RmsNormRopeTilingData> {
    using Base = RowKernel<KernelRmsNormRope<T, TG>, RmsNormRopeTilingData>;
    friend Base;
    using Base::td_;

public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR gamma, GM_ADDR cos, GM_ADDR sin, GM_ADDR y,
                                const RmsNormRopeTilingData &td)
    {
        RowRange r = this->InitRows(td);
        start_ = r.start;
        uint64_t n = td.numCols;
        half_ = td.numCols / 2;
        xGm.SetGlobalBuffer((__gm__ T *)x + r.start * n, r.count * n);
        yGm.SetGlobalBuffer((__gm__ T *)y + r.start * n, r.count * n);
        // cos / sin: as many rows as the last row of x reads, plus one
        uint64_t cosRows = td.numRows ? 1 : 0;
        for (int32_t k = 0; k < 3; ++k) cosRows += (td.lead[k] ? td.lead[k] - 1 : 0) * td.cosRowStride[k];
        cosGm.SetGlobalBuffer((__gm__ T *)cos, cosRows * n);
        sinGm.SetGlobalBuffer((__gm__ T *)sin, cosRows * n);
        gammaGm.SetGlobalBuffer((__gm__ TG *)gamma, n);
        uint32_t rows = this->TileRows();
        pitch_ = Align(half_, 32 / sizeof(T));  // one half in the UB
        pitchF_ = Align(half_, 8);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, rows * 2 * pitch_ * sizeof(T));
        pipe.InitBuffer(inQueueCos, BUFFER_NUM, rows * 2 * pitch_ * sizeof(T));
        pipe.InitBuffer(inQueueSin, BUFFER_NUM, rows * 2 * pitch_ * sizeof(T));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, rows * 2 * pitch_ * sizeof(T));
        pipe.InitBuffer(gammaBuf, 2 * Align(half_, 32 / sizeof(TG)) * sizeof(TG));
        pipe.InitBuffer(gammaFpBuf, 2 * pitchF_ * sizeof(float));
        pipe.InitBuffer(workBuf, 8 * pitchF_ * sizeof(float));
        pipe.InitBuffer(reduceWorkBuf, ReduceWorkBufBytes(half_));
        pipe.InitBuffer(scalarBuf, 32);
        pipe.InitBuffer(oneBuf, 32);
    }

private:
    __aicore__ inline void BeginWholeRows()
    {
        // gamma's two halves, each from an aligned block, up-cast once
        LocalTensor<TG> g = gammaBuf.Get<TG>();
        uint32_t gPitch = Align(half_, 32 / sizeof(TG));
        CopyRowsIn(g, gammaGm, 2, half_);
        SetFlag<HardEvent::MTE2_V>(0);
        WaitFlag<HardEvent::MTE2_V>(0);
        LocalTensor<float> gF = gammaFpBuf.Get<float>();
        ToFloat(gF, g, half_);
        ToFloat(gF[pitchF_], g[gPitch], half_);
        PipeBarrier<PIPE_V>();
    }

    // the cos / sin row of this block's row `row`
    __aicore__ inline uint64_t CosRow(uint64_t row) const
    {
        uint64_t r = start_ + row;
        uint64_t i2 = r % td_.lead[2];
        r /= td_.lead[2];
        uint64_t i1 = r % td_.lead[1];
        uint64_t i0 = r / td_.lead[1];
        return i0 * td_.cosRowStride[0] + i1 * td_.cosRowStride[1] + i2 * td_.cosRowStride[2];
    }

    __aicore__ inline void WholeRows(uint64_t row0, uint32_t rows)
    {
        uint64_t n = td_.numCols;
        LocalTensor<T> x = inQueueX.AllocTensor<T>();
        LocalTensor<T> c = inQueueCos.AllocTensor<T>();
        LocalTensor<T> s = inQueueSin.AllocTensor<T>();
        CopyRowsIn(x, xGm[row0 * n], 2 * rows, half_);  // the halves of the rows, in order
        for (uint32_t r = 0; r < rows; ++r) {
            uint64_t cr = CosRow(row0 + r) * n;
            CopyRowsIn(c[2 * r * pitch_], cosGm[cr], 2, half_);
            CopyRowsIn(s[2 * r * pitch_], sinGm[cr], 2, half_);
        }
        inQueueX.EnQue(x);
        inQueueCos.EnQue(c);
        inQueueSin.EnQue(s);
        Compute(rows);
        LocalTensor<T> y = outQueueY.DeQue<T>();
        CopyRowsOut(yGm[row0 * n], y, 2 * rows, half_);
        outQueueY.FreeTensor(y);
    }

    __aicore__ inline void Compute(uint32_t rows)
    {
        LocalTensor<T> x = inQueueX.DeQue<T>();
        LocalTensor<T> c = inQueueCos.DeQue<T>();
        LocalTensor<T> s = inQueueSin.DeQue<T>();
        LocalTensor<T> y = outQueueY.AllocTensor<T>();
        LocalTensor<float> w = workBuf.Get<float>();
        LocalTensor<float> a = w, b = w[pitchF_], ca = w[2 * pitchF_], cb = w[3 * pitchF_];
        LocalTensor<float> sa = w[4 * pitchF_], sb = w[5 * pitchF_], p = w[6 * pitchF_], q = w[7 * pitchF_];
        LocalTensor<float> gF = gammaFpBuf.Get<float>();
        for (uint32_t r = 0; r < rows; ++r) {
            uint32_t o = 2 * r * pitch_;
            ToFloat(a, x[o], half_);
            ToFloat(b, x[o + pitch_], half_);
            PipeBarrier<PIPE_V>();
            float sum = SumSquares(p, a, reduceWorkBuf.Get<float>(), scalarBuf.Get<float>(), half_) +
                        SumSquares(q, b, reduceWorkBuf.Get<float>(), scalarBuf.Get<float>(), half_);
            float rstd = RstdFromSum(scalarBuf.Get<float>(), oneBuf.Get<float>(), sum, td_.avgFactor, td_.epsilon);
            // t = (x * rstd) * gamma, rounded to T (into y's blocks) and read back
            Muls(a, a, rstd, half_);
            Muls(b, b, rstd, half_);
            PipeBarrier<PIPE_V>();
            Mul(a, a, gF, half_);
            Mul(b, b, gF[pitchF_], half_);
            PipeBarrier<PIPE_V>();
            FromFloat(y[o], a, half_);
            FromFloat(y[o + pitch_], b, half_);
            PipeBarrier<PIPE_V>();
            ToFloat(a, y[o], half_);
            ToFloat(b, y[o + pitch_], half_);
            ToFloat(ca, c[o], half_);
            ToFloat(cb, c[o + pitch_], half_);
            ToFloat(sa, s[o], half_);
            ToFloat(sb, s[o + pitch_], half_);
            PipeBarrier<PIPE_V>();
            // first half: t1 * cos1 - t2 * sin1; second: t2 * cos2 + t1 * sin2 (each product rounded)
            Mul(p, a, ca, half_);
            Mul(q, b, sa, half_);
            PipeBarrier<PIPE_V>();
            Sub(p, p, q, half_);
            PipeBarrier<PIPE_V>();
            FromFloat(y[o], p, half_);
            Mul(p, b, cb, half_);
            Mul(q, a, sb, half_);
            PipeBarrier<PIPE_V>();
            Add(p, p, q, half_);
            PipeBarrier<PIPE_V>();
            FromFloat(y[o + pitch_], p, half_);
            PipeBarrier<PIPE_V>();
        }
        outQueueY.EnQue(y);
        inQueueX.FreeTensor(x);
        inQueueCos.FreeTensor(c);
        inQueueSin.FreeTensor(s);
    }

    __aicore__ inline void SplitRow(uint64_t) {}  // never chosen: D <= 1024

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX, inQueueCos, inQueueSin;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY;
    TBuf<TPosition::VECCALC> gammaBuf, gammaFpBuf, workBuf, reduceWorkBuf, scalarBuf, oneBuf;
    GlobalTensor<T> xGm, yGm, cosGm, sinGm;
    GlobalTensor<TG> gammaGm;
    uint64_t start_ = 0;
    uint32_t half_ = 0, pitch_ = 0, pitchF_ = 0;
};
}  // namespace

#ifndef DTYPE_X
#define DTYPE_X half
#endif
#ifndef DTYPE_GAMMA
#define DTYPE_GAMMA DTYPE_X
#endif

extern "C" __global__ __aicore__ void rms_norm_rope(GM_ADDR x, GM_ADDR gamma, GM_ADDR cos, GM_ADDR sin, GM_ADDR y,
                                                    GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(RmsNormRopeTilingData);
    GET_TILING_DATA_WITH_STRUCT(RmsNormRopeTilingData, tilingData, tiling);
    (void)workspace;
    KernelRmsNormRope<DTYPE_X, DTYPE_GAMMA> op;
    op.Init(x, gamma, cos, sin, y, tilingData);
    op.Process();
}
