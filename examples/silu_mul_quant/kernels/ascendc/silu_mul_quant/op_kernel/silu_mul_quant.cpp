// SiluMulQuant (the plugin example's my_ops::silu_mul_quant) for the vector cores:
// h = silu(gate) * up = gate / (1 + exp(-gate)) * up in fp32, amax = max|h| per row,
// scale = amax / 127, y = rint(h * ((1 / amax) * 127)) saturated to int8 (amax = 0: scale 0,
// y 0; the example's reference computes 127 / amax as reciprocal(amax) * 127, and so does the
// kernel). T: half or bfloat16_t (gate, up). Tiling keys: 1 whole rows per tile
// (double-buffered); 2 split row: a first pass over the row's chunks finds amax, a second
// recomputes h and quantises.
#include "kernel_operator.h"
#include "common/kernel_common.h"
#include "common/row_kernel.h"
#include "../op_host/silu_mul_quant_tiling.h"

namespace {
using namespace AscendC;
using namespace opsdk_ascendc;

constexpr int32_t BUFFER_NUM = 2;

template <typename T>
class KernelSiluMulQuant : public RowKernel<KernelSiluMulQuant<T>, SiluMulQuantTilingData> {
    using Base = RowKernel<KernelSiluMulQuant<T>, SiluMulQuantTilingData>;
    friend Base;
    using Base::td_;

public:
    __aicore__ inline void Init(GM_ADDR gate, GM_ADDR up, GM_ADDR y, GM_ADDR scale, const SiluMulQuantTilingData &td)
    {
        RowRange r = this->InitRows(td);
        uint64_t n = td.numCols;
        gateGm.SetGlobalBuffer((__gm__ T *)gate + r.start * n, r.count * n);
        upGm.SetGlobalBuffer((__gm__ T *)up + r.start * n, r.count * n);
        yGm.SetGlobalBuffer((__gm__ int8_t *)y + r.start * n, r.count * n);
        scaleGm.SetGlobalBuffer((__gm__ float *)scale + r.start, r.count);
        uint32_t work = this->TileCols();
        uint32_t rows = this->TileRows();
        pitchX_ = Align(work, 32 / sizeof(T));
        pitchY_ = Align(work, 32);
        pitchF_ = Align(work, 8);
        pipe.InitBuffer(inQueueGate, BUFFER_NUM, rows * pitchX_ * sizeof(T));
        pipe.InitBuffer(inQueueUp, BUFFER_NUM, rows * pitchX_ * sizeof(T));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, rows * pitchY_);
        pipe.InitBuffer(outQueueScale, BUFFER_NUM, rows * sizeof(float));
        pipe.InitBuffer(hFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(tFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(absBuf, pitchF_ * sizeof(float));  // |h|, then the int32 step of the cast
        pipe.InitBuffer(halfBuf, Align(work, 16) * sizeof(half));
        pipe.InitBuffer(reduceWorkBuf, ReduceWorkBufBytes(work));
        pipe.InitBuffer(scalarBuf, 32);
    }

private:
    // 127 / amax as the reference computes it: reciprocal(amax) * 127; 0 for amax = 0
    static __aicore__ inline float Inverse(float amax) { return amax > 0.0f ? (1.0f / amax) * DYNAMIC_QUANT_MAX : 0.0f; }

    __aicore__ inline void CopyIn(uint64_t off, uint32_t rows, uint32_t cols)
    {
        LocalTensor<T> g = inQueueGate.AllocTensor<T>();
        LocalTensor<T> u = inQueueUp.AllocTensor<T>();
        CopyRowsIn(g, gateGm[off], rows, cols);
        CopyRowsIn(u, upGm[off], rows, cols);
        inQueueGate.EnQue(g);
        inQueueUp.EnQue(u);
    }

    // hF = gate / (1 + exp(-gate)) * up (fp32); returns max|hF|
    __aicore__ inline float SiluMul(const LocalTensor<T> &g, const LocalTensor<T> &u, uint32_t n)
    {
        LocalTensor<float> h = hFpBuf.Get<float>();
        LocalTensor<float> t = tFpBuf.Get<float>();
        ToFloat(h, g, n);
        PipeBarrier<PIPE_V>();
        Muls(t, h, -1.0f, n);
        PipeBarrier<PIPE_V>();
        Exp(t, t, n);
        PipeBarrier<PIPE_V>();
        Adds(t, t, 1.0f, n);
        PipeBarrier<PIPE_V>();
        Div(h, h, t, n);
        ToFloat(t, u, n);
        PipeBarrier<PIPE_V>();
        Mul(h, h, t, n);
        PipeBarrier<PIPE_V>();
        return AbsMax(absBuf.Get<float>(), h, reduceWorkBuf.Get<float>(), scalarBuf.Get<float>(), n);
    }

    __aicore__ inline void Quantize(const LocalTensor<int8_t> &y, float inv, uint32_t n)
    {
        LocalTensor<float> h = hFpBuf.Get<float>();
        DynamicQuantRow(y, h, h, inv, absBuf.Get<int32_t>(), halfBuf.Get<half>(), n);
    }

    // ---- key 1 ---------------------------------------------------------------------------
    __aicore__ inline void WholeRows(uint64_t row0, uint32_t rows)
    {
        uint64_t off = row0 * td_.numCols;
        CopyIn(off, rows, td_.numCols);
        LocalTensor<T> g = inQueueGate.DeQue<T>();
        LocalTensor<T> u = inQueueUp.DeQue<T>();
        LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
        LocalTensor<float> scaleLocal = outQueueScale.AllocTensor<float>();
        for (uint32_t r = 0; r < rows; ++r) {
            float amax = SiluMul(g[r * pitchX_], u[r * pitchX_], td_.numCols);
            scaleLocal.SetValue(r, DynamicQuantScale(amax));
            Quantize(yLocal[r * pitchY_], Inverse(amax), td_.numCols);
        }
        outQueueY.EnQue(yLocal);
        outQueueScale.EnQue(scaleLocal);
        inQueueGate.FreeTensor(g);
        inQueueUp.FreeTensor(u);
        yLocal = outQueueY.DeQue<int8_t>();
        scaleLocal = outQueueScale.DeQue<float>();
        SetFlag<HardEvent::S_MTE3>(0);  // scale was written by the scalar unit
        WaitFlag<HardEvent::S_MTE3>(0);
        CopyRowsOut(yGm[off], yLocal, rows, td_.numCols);
        CopyRowsOut(scaleGm[row0], scaleLocal, 1, rows);
        outQueueY.FreeTensor(yLocal);
        outQueueScale.FreeTensor(scaleLocal);
    }

    // ---- key 2 ---------------------------------------------------------------------------
    __aicore__ inline float LoadChunk(uint64_t off, uint32_t len)
    {
        CopyIn(off, 1, len);
        LocalTensor<T> g = inQueueGate.DeQue<T>();
        LocalTensor<T> u = inQueueUp.DeQue<T>();
        float m = SiluMul(g, u, len);
        inQueueGate.FreeTensor(g);
        inQueueUp.FreeTensor(u);
        return m;
    }

    __aicore__ inline void SplitRow(uint64_t row)
    {
        float amax = 0.0f;
        for (uint32_t c = 0; c < td_.numChunks; ++c) {  // pass 1: amax
            uint32_t len = this->ChunkLen(c);
            float m = LoadChunk(this->ChunkOffset(row, c), len);
            amax = m > amax ? m : amax;
        }
        float inv = Inverse(amax);
        for (uint32_t c = 0; c < td_.numChunks; ++c) {  // pass 2: h again, quantised
            uint32_t len = this->ChunkLen(c);
            uint64_t off = this->ChunkOffset(row, c);
            LoadChunk(off, len);
            LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
            Quantize(yLocal, inv, len);
            outQueueY.EnQue(yLocal);
            yLocal = outQueueY.DeQue<int8_t>();
            CopyRowsOut(yGm[off], yLocal, 1, len);
            outQueueY.FreeTensor(yLocal);
        }
        WriteScalarOut(outQueueScale, scaleGm[row], DynamicQuantScale(amax));
    }

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueGate, inQueueUp;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY, outQueueScale;
    TBuf<TPosition::VECCALC> hFpBuf, tFpBuf, absBuf, halfBuf, reduceWorkBuf, scalarBuf;
    GlobalTensor<T> gateGm, upGm;
    GlobalTensor<int8_t> yGm;
    GlobalTensor<float> scaleGm;
    uint32_t pitchX_ = 0, pitchY_ = 0, pitchF_ = 0;
};
}  // namespace

#ifndef DTYPE_GATE
#define DTYPE_GATE half
#endif

extern "C" __global__ __aicore__ void silu_mul_quant(GM_ADDR gate, GM_ADDR up, GM_ADDR y, GM_ADDR scale,
                                                      GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(SiluMulQuantTilingData);
    GET_TILING_DATA_WITH_STRUCT(SiluMulQuantTilingData, tilingData, tiling);
    (void)workspace;
    KernelSiluMulQuant<DTYPE_GATE> op;
    op.Init(gate, up, y, scale, tilingData);
    op.Process();
}
