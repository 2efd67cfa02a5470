// DynamicQuant (npu_dynamic_quant, per token, int8) for the vector cores:
// s = x * smooth_scales in fp32 (smooth_scales optional, x's dtype), amax = max|s| per row,
// scale = amax / 127, y = rint(s * (127 / amax)) saturated to int8 (amax = 0: scale 0, y 0).
// T: half or bfloat16_t. group_index (MoE) is not implemented (the tiling rejects it).
// Tiling keys: 1 whole rows per tile (double-buffered, smooth_scales resident in fp32);
// 2 split row: a first pass over the row's chunks finds amax, a second quantises.
#include "kernel_operator.h"
#include "../../common/kernel_common.h"
#include "../op_host/dynamic_quant_tiling.h"

namespace {
using namespace AscendC;
using namespace opsdk_ascendc;

constexpr int32_t BUFFER_NUM = 2;

template <typename T>
class KernelDynamicQuant {
public:
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR smooth, GM_ADDR y, GM_ADDR scale, const DynamicQuantTilingData &td)
    {
        td_ = td;
        RowRange r = BlockRows(td.rowsPerBlock, td.formerBlocks);
        rowCount_ = r.count;
        uint64_t n = td.numCols;
        xGm.SetGlobalBuffer((__gm__ T *)x + r.start * n, r.count * n);
        yGm.SetGlobalBuffer((__gm__ int8_t *)y + r.start * n, r.count * n);
        scaleGm.SetGlobalBuffer((__gm__ float *)scale + r.start, r.count);
        if (td.hasSmooth) smoothGm.SetGlobalBuffer((__gm__ T *)smooth, n);
        bool whole = td.tilingKey == TILING_KEY_WHOLE_ROW;
        uint32_t work = whole ? td.numCols : td.chunkCols;
        uint32_t rows = whole ? td.rowsPerLoop : 1;
        pitchX_ = Align(work, 32 / sizeof(T));
        pitchY_ = Align(work, 32);
        pitchF_ = Align(work, 8);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, rows * pitchX_ * sizeof(T));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, rows * pitchY_);
        pipe.InitBuffer(outQueueScale, BUFFER_NUM, rows * sizeof(float));
        if (td.hasSmooth) {
            pipe.InitBuffer(smoothBuf, pitchX_ * sizeof(T));
            pipe.InitBuffer(smoothFpBuf, pitchF_ * sizeof(float));
        }
        pipe.InitBuffer(xFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(absBuf, pitchF_ * sizeof(float));  // |s|, then the int32 step of the cast
        pipe.InitBuffer(halfBuf, Align(work, 16) * sizeof(half));
        pipe.InitBuffer(reduceWorkBuf, ReduceWorkBufBytes(work));
        pipe.InitBuffer(scalarBuf, 32);
    }

    __aicore__ inline void Process()
    {
        if (rowCount_ == 0) return;
        if (td_.tilingKey == TILING_KEY_WHOLE_ROW) {
            ProcessWholeRow();
        } else if (td_.tilingKey == TILING_KEY_SPLIT_ROW) {
            ProcessSplitRow();
        }
    }

private:
    __aicore__ inline void LoadSmooth(uint64_t col0, uint32_t len)
    {
        if (!td_.hasSmooth) return;
        LocalTensor<T> sm = smoothBuf.Get<T>();
        LoadAndWait(sm, smoothGm[col0], len);
        ToFloat(smoothFpBuf.Get<float>(), sm, len);
        PipeBarrier<PIPE_V>();
    }

    // xF = x (* smooth) in fp32; returns max|xF| over n
    __aicore__ inline float Smoothed(const LocalTensor<T> &x, uint32_t n)
    {
        LocalTensor<float> xF = xFpBuf.Get<float>();
        LocalTensor<float> a = absBuf.Get<float>();
        LocalTensor<float> s = scalarBuf.Get<float>();
        ToFloat(xF, x, n);
        PipeBarrier<PIPE_V>();
        if (td_.hasSmooth) {
            Mul(xF, xF, smoothFpBuf.Get<float>(), n);
            PipeBarrier<PIPE_V>();
        }
        return AbsMax(a, xF, reduceWorkBuf.Get<float>(), s, n);
    }

    // y = rint(xF * inv), saturated
    __aicore__ inline void Quantize(const LocalTensor<int8_t> &y, float inv, uint32_t n)
    {
        LocalTensor<float> xF = xFpBuf.Get<float>();
        DynamicQuantRow(y, xF, xF, inv, absBuf.Get<int32_t>(), halfBuf.Get<half>(), n);
    }

    // ---- key 1 ---------------------------------------------------------------------------
    __aicore__ inline void ProcessWholeRow()
    {
        LoadSmooth(0, td_.numCols);
        uint64_t loops = (rowCount_ + td_.rowsPerLoop - 1) / td_.rowsPerLoop;
        for (uint64_t i = 0; i < loops; ++i) {
            uint64_t row0 = i * td_.rowsPerLoop;
            uint32_t rows = static_cast<uint32_t>(rowCount_ - row0 < td_.rowsPerLoop ? rowCount_ - row0 : td_.rowsPerLoop);
            LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
            CopyRowsIn(xLocal, xGm[row0 * td_.numCols], rows, td_.numCols);
            inQueueX.EnQue(xLocal);
            Compute(rows);
            CopyOut(row0, rows);
        }
    }

    __aicore__ inline void Compute(uint32_t rows)
    {
        LocalTensor<T> xLocal = inQueueX.DeQue<T>();
        LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
        LocalTensor<float> scaleLocal = outQueueScale.AllocTensor<float>();
        for (uint32_t r = 0; r < rows; ++r) {
            float amax = Smoothed(xLocal[r * pitchX_], td_.numCols);
            scaleLocal.SetValue(r, DynamicQuantScale(amax));
            Quantize(yLocal[r * pitchY_], DynamicQuantInverse(amax), td_.numCols);
        }
        outQueueY.EnQue(yLocal);
        outQueueScale.EnQue(scaleLocal);
        inQueueX.FreeTensor(xLocal);
    }

    __aicore__ inline void CopyOut(uint64_t row0, uint32_t rows)
    {
        LocalTensor<int8_t> yLocal = outQueueY.DeQue<int8_t>();
        LocalTensor<float> scaleLocal = outQueueScale.DeQue<float>();
        SetFlag<HardEvent::S_MTE3>(0);  // scale was written by the scalar unit
        WaitFlag<HardEvent::S_MTE3>(0);
        CopyRowsOut(yGm[row0 * td_.numCols], yLocal, rows, td_.numCols);
        CopyRowsOut(scaleGm[row0], scaleLocal, 1, rows);
        outQueueY.FreeTensor(yLocal);
        outQueueScale.FreeTensor(scaleLocal);
    }

    // ---- key 2 ---------------------------------------------------------------------------
    __aicore__ inline uint32_t ChunkLen(uint32_t c) const
    {
        return c + 1 == td_.numChunks ? td_.lastChunkCols : td_.chunkCols;
    }

    __aicore__ inline float LoadSmoothed(uint64_t off, uint32_t len)
    {
        LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
        CopyRowsIn(xLocal, xGm[off], 1, len);
        inQueueX.EnQue(xLocal);
        xLocal = inQueueX.DeQue<T>();
        float m = Smoothed(xLocal, len);
        inQueueX.FreeTensor(xLocal);
        return m;
    }

    __aicore__ inline void ProcessSplitRow()
    {
        for (uint64_t row = 0; row < rowCount_; ++row) {
            float amax = 0.0f;
            for (uint32_t c = 0; c < td_.numChunks; ++c) {  // pass 1: amax
                uint64_t col0 = static_cast<uint64_t>(c) * td_.chunkCols;
                LoadSmooth(col0, ChunkLen(c));
                float m = LoadSmoothed(row * td_.numCols + col0, ChunkLen(c));
                amax = m > amax ? m : amax;
            }
            float inv = DynamicQuantInverse(amax);
            for (uint32_t c = 0; c < td_.numChunks; ++c) {  // pass 2: quantise
                uint32_t len = ChunkLen(c);
                uint64_t col0 = static_cast<uint64_t>(c) * td_.chunkCols;
                LoadSmooth(col0, len);
                LoadSmoothed(row * td_.numCols + col0, len);
                LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
                Quantize(yLocal, inv, len);
                outQueueY.EnQue(yLocal);
                yLocal = outQueueY.DeQue<int8_t>();
                CopyRowsOut(yGm[row * td_.numCols + col0], yLocal, 1, len);
                outQueueY.FreeTensor(yLocal);
            }
            LocalTensor<float> scaleLocal = outQueueScale.AllocTensor<float>();
            scaleLocal.SetValue(0, DynamicQuantScale(amax));
            outQueueScale.EnQue(scaleLocal);
            scaleLocal = outQueueScale.DeQue<float>();
            SetFlag<HardEvent::S_MTE3>(0);
            WaitFlag<HardEvent::S_MTE3>(0);
            CopyRowsOut(scaleGm[row], scaleLocal, 1, 1);
            outQueueScale.FreeTensor(scaleLocal);
        }
    }

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY, outQueueScale;
    TBuf<TPosition::VECCALC> smoothBuf, smoothFpBuf, xFpBuf, absBuf, halfBuf, reduceWorkBuf, scalarBuf;
    GlobalTensor<T> xGm, smoothGm;
    GlobalTensor<int8_t> yGm;
    GlobalTensor<float> scaleGm;
    DynamicQuantTilingData td_{};
    uint64_t rowCount_ = 0;
    uint32_t pitchX_ = 0, pitchY_ = 0, pitchF_ = 0;
};
}  // namespace

#ifndef DTYPE_X
#define DTYPE_X half
#endif

extern "C" __global__ __aicore__ void dynamic_quant(GM_ADDR x, GM_ADDR smooth_scales, GM_ADDR group_index, GM_ADDR y,
                                                     GM_ADDR scale, GM_ADDR workspace, GM_ADDR tiling)
{
    KERNEL_TASK_TYPE_DEFAULT(KERNEL_TYPE_AIV_ONLY);
    REGISTER_TILING_DEFAULT(DynamicQuantTilingData);
    GET_TILING_DATA_WITH_STRUCT(DynamicQuantTilingData, tilingData, tiling);
    (void)workspace;
    (void)group_index;  // MoE groups: rejected by the tiling (tilingKey 0)
    KernelDynamicQuant<DTYPE_X> op;
    op.Init(x, smooth_scales, y, scale, tilingData);
    op.Process();
}
