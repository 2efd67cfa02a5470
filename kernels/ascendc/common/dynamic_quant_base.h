// The kernel body of symmetric dynamic quantisation, DynamicQuant and DynamicQuantV2
// (npu_dynamic_quant): s = x * smooth_scales in fp32, amax = max|s| per token (row), per
// tensor or per channel (over dim -2), scale = amax / DMAX, y = rint(s * (DMAX / amax))
// saturated to int8 (DMAX 127) or int4 (DMAX 7, packed two per byte, element 0 in the low
// nibble); amax = 0 gives scale 0 and y 0. 8-bit float outputs (td.outType, Ascend 950):
// scale = amax * (1 / DTYPE_MAX) (fp32), y = s / scale cast to float8_e5m2 / float8_e4m3fn
// (RINT) or hifloat8 (ROUND), saturating; scale 0 gives y 0. T: half or bfloat16_t.
//
// smooth_scales: (numCols) per column; with group_index (MoE, per token) (E, numCols), row r
// taking the row of its group g, the first g with group_index[g] > r (group_index holds the
// cumulative end rows of the groups); per channel (chanRows), one factor per row of dim -2.
// The offset output of DynamicQuantV2 (symmetric) is written as zeros, shaped like scale.
// Tiling keys: dynamic_quant/op_host/dynamic_quant_tiling.h.
#pragma once

#include "kernel_operator.h"
#include "kernel_common.h"
#include "../dynamic_quant/op_host/dynamic_quant_tiling.h"

namespace opsdk_ascendc {

template <typename T>
class KernelDynamicQuantBase {
    static constexpr int32_t BUFFER_NUM = 2;

public:
    // offset: DynamicQuantV2's offset output (nullptr for DynamicQuant)
    __aicore__ inline void Init(GM_ADDR x, GM_ADDR smooth, GM_ADDR groupIndex, GM_ADDR y, GM_ADDR scale,
                                GM_ADDR offset, const DynamicQuantTilingData &td)
    {
        td_ = td;
        hasOffset_ = offset != nullptr;
        dmax_ = td.int4Out ? 7.0f : 127.0f;
        f8_ = td.outType != OUT_INT8;
        inv8_ = f8_ ? 1.0f / td.float8Max : 0.0f;
        uint64_t n = td.numCols;
        uint32_t key = td.tilingKey;
        RowRange r = BlockRows(td.rowsPerBlock, td.formerBlocks);
        start_ = r.start;
        count_ = r.count;
        if (key == DQ_KEY_CHANNEL) {
            InitChannel(x, smooth, y, scale, offset);
            return;
        }
        bool tensor = key == DQ_KEY_TENSOR_WHOLE || key == DQ_KEY_TENSOR_SPLIT;
        xGm.SetGlobalBuffer((__gm__ T *)x, td.numRows * n);  // per tensor: every block reads every row
        yGm.SetGlobalBuffer((__gm__ int8_t *)y + r.start * YBytes(n), r.count * YBytes(n));
        uint64_t scaleOff = tensor ? 0 : r.start, scaleLen = tensor ? 1 : r.count;
        scaleGm.SetGlobalBuffer((__gm__ float *)scale + scaleOff, scaleLen);
        if (hasOffset_) offsetGm.SetGlobalBuffer((__gm__ float *)offset + scaleOff, scaleLen);
        if (td.hasSmooth) smoothGm.SetGlobalBuffer((__gm__ T *)smooth, (td.numGroups ? td.numGroups : 1) * n);
        if (td.numGroups) groupGm.SetGlobalBuffer((__gm__ int32_t *)groupIndex, td.numGroups);
        bool whole = key == DQ_KEY_TOKEN_WHOLE || key == DQ_KEY_TENSOR_WHOLE;
        uint32_t work = whole ? td.numCols : td.chunkCols;
        uint32_t rows = whole ? td.rowsPerLoop : 1;
        pitchX_ = Align(work, 32 / sizeof(T));
        pitchY_ = Align(YBytes(work), 32);
        pitchF_ = Align(work, 8);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, rows * pitchX_ * sizeof(T));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, rows * pitchY_);
        pipe.InitBuffer(outQueueScale, BUFFER_NUM, Align(rows, 8) * sizeof(float));
        if (hasOffset_) pipe.InitBuffer(zeroBuf, Align(rows, 8) * sizeof(float));
        if (td.hasSmooth) {
            pipe.InitBuffer(smoothBuf, pitchX_ * sizeof(T));
            pipe.InitBuffer(smoothFpBuf, pitchF_ * sizeof(float));
        }
        pipe.InitBuffer(xFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(absBuf, pitchF_ * sizeof(float));  // |s|, then the int32 step of the cast
        pipe.InitBuffer(halfBuf, Align(work, 16) * sizeof(half));
        pipe.InitBuffer(reduceWorkBuf, ReduceWorkBufBytes(work));
        pipe.InitBuffer(scalarBuf, 32);
        if (hasOffset_) {
            Duplicate(zeroBuf.Get<float>(), 0.0f, static_cast<int32_t>(Align(rows, 8)));
            PipeBarrier<PIPE_V>();
        }
    }

    __aicore__ inline void Process()
    {
        switch (td_.tilingKey) {
            case DQ_KEY_TOKEN_WHOLE: if (count_) ProcessWholeRow(false, 0.0f); break;
            case DQ_KEY_TOKEN_SPLIT: ProcessSplitRow(false, 0.0f); break;
            case DQ_KEY_TENSOR_WHOLE:
            case DQ_KEY_TENSOR_SPLIT: ProcessTensor(); break;
            case DQ_KEY_CHANNEL: ProcessChannel(); break;
            default: break;
        }
    }

private:
    __aicore__ inline uint64_t YBytes(uint64_t n) const { return td_.int4Out ? n / 2 : n; }  // 8-bit floats: n

    // y = sat(rint(v)) to int8, or to int4 packed two per byte (v already scaled; |v| is at most
    // DMAX up to rounding, so the int32 -> half step is exact)
    __aicore__ inline void ToInt(const LocalTensor<int8_t> &y, const LocalTensor<float> &v, uint32_t n)
    {
        LocalTensor<int32_t> i32 = absBuf.Get<int32_t>();
        LocalTensor<half> h = halfBuf.Get<half>();
        if (td_.int4Out) {
            FloatToInt4(y, v, i32, h, n);
        } else {
            FloatToInt8(y, v, i32, h, n);
        }
        PipeBarrier<PIPE_V>();
    }

    // scale = amax / DMAX (int8 / int4) or amax * (1 / DTYPE_MAX) (8-bit floats); the factor
    // QuantizeSmoothed takes: inv = DMAX / amax (0 for amax 0), or the scale itself
    __aicore__ inline float Scale(float amax) const { return f8_ ? amax * inv8_ : amax / dmax_; }
    __aicore__ inline float Factor(float amax) const
    {
        return f8_ ? Scale(amax) : (amax > 0.0f ? dmax_ / amax : 0.0f);
    }

    // ---- smooth_scales (per column; the group's row with group_index) ---------------------
    __aicore__ inline void LoadSmooth(uint64_t col0, uint32_t len)
    {
        if (!td_.hasSmooth) return;
        LocalTensor<T> sm = smoothBuf.Get<T>();
        SetFlag<HardEvent::V_MTE2>(0);  // the staging buffer's last cast is done
        WaitFlag<HardEvent::V_MTE2>(0);
        LoadAndWait(sm, smoothGm[static_cast<uint64_t>(group_) * td_.numCols + col0], len);
        ToFloat(smoothFpBuf.Get<float>(), sm, len);
        PipeBarrier<PIPE_V>();
    }

    // With group_index: the group of global row `row` (group_ only moves forward, rows come in
    // order); returns whether it changed. Values past the last group stay in the last group.
    __aicore__ inline bool SelectGroup(uint64_t row)
    {
        if (td_.numGroups == 0) return false;
        uint32_t g = group_;
        while (g + 1 < td_.numGroups && static_cast<int64_t>(groupGm.GetValue(g)) <= static_cast<int64_t>(row)) ++g;
        bool changed = g != group_;
        group_ = g;
        return changed;
    }

    // xF = x (* smooth) in fp32; returns max|xF| over n
    __aicore__ inline float Smoothed(const LocalTensor<T> &x, uint32_t n)
    {
        LocalTensor<float> xF = xFpBuf.Get<float>();
        ToFloat(xF, x, n);
        PipeBarrier<PIPE_V>();
        if (td_.hasSmooth) {
            Mul(xF, xF, smoothFpBuf.Get<float>(), n);
            PipeBarrier<PIPE_V>();
        }
        return AbsMax(absBuf.Get<float>(), xF, reduceWorkBuf.Get<float>(), scalarBuf.Get<float>(), n);
    }

    // y from xF: int8 / int4 with factor inv = DMAX / amax; 8-bit floats with factor scale:
    // xF / scale (a vector Div by the scale duplicated into absBuf), or 0 where scale is 0
    __aicore__ inline void QuantizeSmoothed(const LocalTensor<int8_t> &y, float factor, uint32_t n)
    {
        LocalTensor<float> xF = xFpBuf.Get<float>();
        if (!f8_) {
            Muls(xF, xF, factor, n);
            PipeBarrier<PIPE_V>();
            ToInt(y, xF, n);
            return;
        }
        if (factor > 0.0f) {
            LocalTensor<float> sc = absBuf.Get<float>();
            Duplicate(sc, factor, static_cast<int32_t>(n));
            PipeBarrier<PIPE_V>();
            Div(xF, xF, sc, n);
            PipeBarrier<PIPE_V>();
            FloatToFloat8(y, xF, td_.outType, n);
        } else {
            Duplicate(y.ReinterpretCast<int16_t>(), static_cast<int16_t>(0), static_cast<int32_t>((n + 1) / 2));
        }
        PipeBarrier<PIPE_V>();
    }

    __aicore__ inline uint32_t ChunkLen(uint32_t c) const
    {
        return c + 1 == td_.numChunks ? td_.lastChunkCols : td_.chunkCols;
    }

    // one / rows whole rows of x (global row row0) into the input queue
    __aicore__ inline void CopyXIn(uint64_t off, uint32_t rows, uint32_t cols)
    {
        LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
        CopyRowsIn(xLocal, xGm[off], rows, cols);
        inQueueX.EnQue(xLocal);
    }

    // scale (and zero offsets) of `rows` consecutive outputs from scaleLocal
    __aicore__ inline void CopyScaleOut(uint64_t idx, uint32_t rows)
    {
        LocalTensor<float> scaleLocal = outQueueScale.DeQue<float>();
        SetFlag<HardEvent::S_MTE3>(0);  // scale was written by the scalar unit
        WaitFlag<HardEvent::S_MTE3>(0);
        CopyRowsOut(scaleGm[idx], scaleLocal, 1, rows);
        if (hasOffset_) CopyRowsOut(offsetGm[idx], zeroBuf.Get<float>(), 1, rows);
        outQueueScale.FreeTensor(scaleLocal);
    }

    // ---- per token (keys 1 / 2) and the quantising pass of per tensor (3 / 4) -------------
    // fixed: quantise with inv (per tensor's Factor) instead of each row's own; no scales written.
    __aicore__ inline void ProcessWholeRow(bool fixed, float inv)
    {
        SelectGroup(start_);
        LoadSmooth(0, td_.numCols);
        uint64_t loops = (count_ + td_.rowsPerLoop - 1) / td_.rowsPerLoop;
        for (uint64_t i = 0; i < loops; ++i) {
            uint64_t row0 = i * td_.rowsPerLoop;
            uint32_t rows = static_cast<uint32_t>(count_ - row0 < td_.rowsPerLoop ? count_ - row0 : td_.rowsPerLoop);
            CopyXIn((start_ + row0) * td_.numCols, rows, td_.numCols);
            LocalTensor<T> xLocal = inQueueX.DeQue<T>();
            LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
            LocalTensor<float> scaleLocal = outQueueScale.AllocTensor<float>();
            for (uint32_t r = 0; r < rows; ++r) {
                if (SelectGroup(start_ + row0 + r)) LoadSmooth(0, td_.numCols);
                float amax = Smoothed(xLocal[r * pitchX_], td_.numCols);
                if (!fixed) scaleLocal.SetValue(r, Scale(amax));
                QuantizeSmoothed(yLocal[r * pitchY_], fixed ? inv : Factor(amax), td_.numCols);
            }
            outQueueY.EnQue(yLocal);
            outQueueScale.EnQue(scaleLocal);
            inQueueX.FreeTensor(xLocal);
            yLocal = outQueueY.DeQue<int8_t>();
            CopyRowsOut(yGm[row0 * YBytes(td_.numCols)], yLocal, rows, static_cast<uint32_t>(YBytes(td_.numCols)));
            outQueueY.FreeTensor(yLocal);
            if (fixed) {
                outQueueScale.FreeTensor(outQueueScale.DeQue<float>());
            } else {
                CopyScaleOut(row0, rows);
            }
        }
    }

    // amax of one chunk of x (global element offset off), x (* smooth) left in xFpBuf
    __aicore__ inline float ChunkAmax(uint64_t off, uint32_t len)
    {
        CopyXIn(off, 1, len);
        LocalTensor<T> xLocal = inQueueX.DeQue<T>();
        float m = Smoothed(xLocal, len);
        inQueueX.FreeTensor(xLocal);
        return m;
    }

    __aicore__ inline float RowAmaxInChunks(uint64_t row)
    {
        float amax = 0.0f;
        for (uint32_t c = 0; c < td_.numChunks; ++c) {
            uint64_t col0 = static_cast<uint64_t>(c) * td_.chunkCols;
            LoadSmooth(col0, ChunkLen(c));
            float m = ChunkAmax(row * td_.numCols + col0, ChunkLen(c));
            amax = m > amax ? m : amax;
        }
        return amax;
    }

    __aicore__ inline void ProcessSplitRow(bool fixed, float inv)
    {
        for (uint64_t i = 0; i < count_; ++i) {
            uint64_t row = start_ + i;
            SelectGroup(row);
            float amax = fixed ? 0.0f : RowAmaxInChunks(row);  // pass 1
            float rowInv = fixed ? inv : Factor(amax);
            for (uint32_t c = 0; c < td_.numChunks; ++c) {  // pass 2: quantise
                uint32_t len = ChunkLen(c);
                uint64_t col0 = static_cast<uint64_t>(c) * td_.chunkCols;
                LoadSmooth(col0, len);
                ChunkAmax(row * td_.numCols + col0, len);
                LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
                QuantizeSmoothed(yLocal, rowInv, len);
                outQueueY.EnQue(yLocal);
                yLocal = outQueueY.DeQue<int8_t>();
                CopyRowsOut(yGm[i * YBytes(td_.numCols) + YBytes(col0)], yLocal, 1, static_cast<uint32_t>(YBytes(len)));
                outQueueY.FreeTensor(yLocal);
            }
            if (!fixed) {
                LocalTensor<float> scaleLocal = outQueueScale.AllocTensor<float>();
                scaleLocal.SetValue(0, Scale(amax));
                outQueueScale.EnQue(scaleLocal);
                CopyScaleOut(i, 1);
            }
        }
    }

    // ---- per tensor (keys 3 / 4) ------------------------------------------------------------
    // Every block reads the whole tensor for amax (no cross-block reduction), then quantises its
    // own rows; block 0 writes the one scale.
    __aicore__ inline void ProcessTensor()
    {
        float amax = 0.0f;
        if (td_.tilingKey == DQ_KEY_TENSOR_WHOLE) {
            LoadSmooth(0, td_.numCols);
            for (uint64_t row0 = 0; row0 < td_.numRows; row0 += td_.rowsPerLoop) {
                uint32_t rows = static_cast<uint32_t>(td_.numRows - row0 < td_.rowsPerLoop ? td_.numRows - row0
                                                                                             : td_.rowsPerLoop);
                CopyXIn(row0 * td_.numCols, rows, td_.numCols);
                LocalTensor<T> xLocal = inQueueX.DeQue<T>();
                for (uint32_t r = 0; r < rows; ++r) {
                    float m = Smoothed(xLocal[r * pitchX_], td_.numCols);
                    amax = m > amax ? m : amax;
                }
                inQueueX.FreeTensor(xLocal);
            }
        } else {
            for (uint64_t row = 0; row < td_.numRows; ++row) {
                float m = RowAmaxInChunks(row);
                amax = m > amax ? m : amax;
            }
        }
        if (count_) {
            if (td_.tilingKey == DQ_KEY_TENSOR_WHOLE) {
                ProcessWholeRow(true, Factor(amax));
            } else {
                ProcessSplitRow(true, Factor(amax));
            }
        }
        if (GetBlockIdx() == 0) {
            LocalTensor<float> scaleLocal = outQueueScale.AllocTensor<float>();
            scaleLocal.SetValue(0, Scale(amax));
            outQueueScale.EnQue(scaleLocal);
            CopyScaleOut(0, 1);
        }
    }

    // ---- per channel (key 5) ----------------------------------------------------------------
    __aicore__ inline void InitChannel(GM_ADDR x, GM_ADDR smooth, GM_ADDR y, GM_ADDR scale, GM_ADDR offset)
    {
        uint64_t n = td_.numCols;
        uint64_t batches = td_.numRows / td_.chanRows;
        xGm.SetGlobalBuffer((__gm__ T *)x, td_.numRows * n);
        yGm.SetGlobalBuffer((__gm__ int8_t *)y, td_.numRows * YBytes(n));
        scaleGm.SetGlobalBuffer((__gm__ float *)scale, batches * n);
        if (hasOffset_) offsetGm.SetGlobalBuffer((__gm__ float *)offset, batches * n);
        if (td_.hasSmooth) smoothGm.SetGlobalBuffer((__gm__ T *)smooth, td_.chanRows);
        uint32_t work = td_.chunkCols, rows = td_.rowsPerLoop;
        pitchX_ = Align(work, 32 / sizeof(T));
        pitchY_ = Align(YBytes(work), 32);
        pitchF_ = Align(work, 8);
        pipe.InitBuffer(inQueueX, BUFFER_NUM, rows * pitchX_ * sizeof(T));
        pipe.InitBuffer(outQueueY, BUFFER_NUM, rows * pitchY_);
        pipe.InitBuffer(outQueueScale, BUFFER_NUM, pitchF_ * sizeof(float));
        if (hasOffset_) pipe.InitBuffer(zeroBuf, pitchF_ * sizeof(float));
        if (td_.hasSmooth) {
            pipe.InitBuffer(smoothBuf, Align(rows, 32 / sizeof(T)) * sizeof(T));
            pipe.InitBuffer(smoothFpBuf, Align(rows, 8) * sizeof(float));
        }
        pipe.InitBuffer(colMaxBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(invBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(dmaxBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(xFpBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(absBuf, pitchF_ * sizeof(float));
        pipe.InitBuffer(halfBuf, Align(work, 16) * sizeof(half));
        Duplicate(dmaxBuf.Get<float>(), dmax_, static_cast<int32_t>(pitchF_));
        if (hasOffset_) Duplicate(zeroBuf.Get<float>(), 0.0f, static_cast<int32_t>(pitchF_));
        PipeBarrier<PIPE_V>();
    }

    // rows m0 .. m0 + rows of dim -2 of batch b, columns col0 .. col0 + len, into the input
    // queue (one strided copy); their smoothing factors into smoothFpBuf
    __aicore__ inline void LoadChannelTile(uint64_t b, uint64_t m0, uint32_t rows, uint64_t col0, uint32_t len)
    {
        if (td_.hasSmooth) {
            LocalTensor<T> sm = smoothBuf.Get<T>();
            SetFlag<HardEvent::V_MTE2>(0);
            WaitFlag<HardEvent::V_MTE2>(0);
            LoadAndWait(sm, smoothGm[m0], rows);
            ToFloat(smoothFpBuf.Get<float>(), sm, rows);
            SetFlag<HardEvent::V_S>(0);  // the factors are read by the scalar unit
            WaitFlag<HardEvent::V_S>(0);
        }
        LocalTensor<T> xLocal = inQueueX.AllocTensor<T>();
        DataCopyExtParams p{static_cast<uint16_t>(rows), static_cast<uint32_t>(len * sizeof(T)),
                            static_cast<uint32_t>((td_.numCols - len) * sizeof(T)), 0, 0};
        DataCopyPadExtParams<T> pad{false, 0, 0, T(0)};
        DataCopyPad(xLocal, xGm[(b * td_.chanRows + m0) * td_.numCols + col0], p, pad);
        inQueueX.EnQue(xLocal);
    }

    // xF = row r of the tile in fp32, times its smoothing factor
    __aicore__ inline void ChannelRow(const LocalTensor<T> &x, uint32_t r, uint32_t pitch, uint32_t len)
    {
        LocalTensor<float> xF = xFpBuf.Get<float>();
        ToFloat(xF, x[r * pitch], len);
        PipeBarrier<PIPE_V>();
        if (td_.hasSmooth) {
            float f = smoothFpBuf.Get<float>().GetValue(r);
            SetFlag<HardEvent::S_V>(0);
            WaitFlag<HardEvent::S_V>(0);
            Muls(xF, xF, f, len);
            PipeBarrier<PIPE_V>();
        }
    }

    // inv = DMAX / amax per column by vector instructions, without a 0 / 0: ind = min(amax * 2^149,
    // 1) is 1 for every amax > 0 (the smallest subnormal times 2^149 is 1) and 0 for amax = 0, and
    // inv = DMAX / (amax + (1 - ind)): DMAX / amax exactly where amax > 0, DMAX for an all-zero
    // column, whose s are all zero, so that its y is 0 as with the reference's inverse 0.
    __aicore__ inline void ChannelInverse(uint32_t len)
    {
        if (f8_) {
            ChannelDivisor(len);
            return;
        }
        LocalTensor<float> cm = colMaxBuf.Get<float>();
        LocalTensor<float> inv = invBuf.Get<float>();
        LocalTensor<float> ind = absBuf.Get<float>();
        LocalTensor<float> den = xFpBuf.Get<float>();
        Muls(ind, cm, 1.7014118346046923e38f, len);  // 2^127
        PipeBarrier<PIPE_V>();
        Muls(ind, ind, 4194304.0f, len);              // 2^22
        PipeBarrier<PIPE_V>();
        Mins(ind, ind, 1.0f, len);
        PipeBarrier<PIPE_V>();
        Muls(den, ind, -1.0f, len);
        PipeBarrier<PIPE_V>();
        Adds(den, den, 1.0f, len);
        PipeBarrier<PIPE_V>();
        Add(den, den, cm, len);
        PipeBarrier<PIPE_V>();
        Div(inv, dmaxBuf.Get<float>(), den, len);
        PipeBarrier<PIPE_V>();
    }

    // 8-bit floats: scale = amax * (1 / DTYPE_MAX) per column into invBuf, then the divisor
    // invBuf = scale + (1 - ind), ind = min(scale * 2^149, 1) (1 where scale > 0, 0 where it is
    // 0: an all-zero column divides by 1), and dmaxBuf = (ind - 1) * -0.0: -0 where scale > 0
    // (adding it changes nothing, -0 included) and +0 where scale is 0 (adding it turns the
    // column's +-0 quotients into +0, the reference's zeros).
    __aicore__ inline void ChannelDivisor(uint32_t len)
    {
        LocalTensor<float> cm = colMaxBuf.Get<float>();
        LocalTensor<float> div = invBuf.Get<float>();
        LocalTensor<float> ind = absBuf.Get<float>();
        LocalTensor<float> tmp = xFpBuf.Get<float>();
        LocalTensor<float> sign = dmaxBuf.Get<float>();
        Muls(div, cm, inv8_, len);
        PipeBarrier<PIPE_V>();
        Muls(ind, div, 1.7014118346046923e38f, len);  // 2^127
        PipeBarrier<PIPE_V>();
        Muls(ind, ind, 4194304.0f, len);               // 2^22
        PipeBarrier<PIPE_V>();
        Mins(ind, ind, 1.0f, len);
        PipeBarrier<PIPE_V>();
        Muls(tmp, ind, -1.0f, len);
        PipeBarrier<PIPE_V>();
        Adds(tmp, tmp, 1.0f, len);
        PipeBarrier<PIPE_V>();
        Add(div, div, tmp, len);
        PipeBarrier<PIPE_V>();
        Adds(sign, ind, -1.0f, len);
        PipeBarrier<PIPE_V>();
        Muls(sign, sign, -0.0f, len);
        PipeBarrier<PIPE_V>();
    }

    __aicore__ inline void ProcessChannel()
    {
        for (uint64_t u = start_; u < start_ + count_; ++u) {
            uint64_t b = u / td_.numChunks;
            uint32_t c = static_cast<uint32_t>(u % td_.numChunks);
            uint32_t len = ChunkLen(c);
            uint64_t col0 = static_cast<uint64_t>(c) * td_.chunkCols;
            uint32_t pitchX = Align(len, 32 / sizeof(T)), pitchY = Align(static_cast<uint32_t>(YBytes(len)), 32);
            LocalTensor<float> cm = colMaxBuf.Get<float>();
            Duplicate(cm, 0.0f, static_cast<int32_t>(len));
            PipeBarrier<PIPE_V>();
            for (uint64_t m0 = 0; m0 < td_.chanRows; m0 += td_.rowsPerLoop) {  // pass 1: column max
                uint32_t rows = static_cast<uint32_t>(td_.chanRows - m0 < td_.rowsPerLoop ? td_.chanRows - m0
                                                                                         : td_.rowsPerLoop);
                LoadChannelTile(b, m0, rows, col0, len);
                LocalTensor<T> xLocal = inQueueX.DeQue<T>();
                for (uint32_t r = 0; r < rows; ++r) {
                    ChannelRow(xLocal, r, pitchX, len);
                    Abs(absBuf.Get<float>(), xFpBuf.Get<float>(), len);
                    PipeBarrier<PIPE_V>();
                    Max(cm, cm, absBuf.Get<float>(), len);
                    PipeBarrier<PIPE_V>();
                }
                inQueueX.FreeTensor(xLocal);
            }
            ChannelInverse(len);
            LocalTensor<float> scaleLocal = outQueueScale.AllocTensor<float>();
            if (f8_) {
                Muls(scaleLocal, cm, inv8_, len);  // scale = amax * (1 / DTYPE_MAX)
            } else {
                Div(scaleLocal, cm, dmaxBuf.Get<float>(), len);  // scale = amax / DMAX
            }
            outQueueScale.EnQue(scaleLocal);
            scaleLocal = outQueueScale.DeQue<float>();
            CopyRowsOut(scaleGm[b * td_.numCols + col0], scaleLocal, 1, len);
            if (hasOffset_) CopyRowsOut(offsetGm[b * td_.numCols + col0], zeroBuf.Get<float>(), 1, len);
            outQueueScale.FreeTensor(scaleLocal);
            for (uint64_t m0 = 0; m0 < td_.chanRows; m0 += td_.rowsPerLoop) {  // pass 2: quantise
                uint32_t rows = static_cast<uint32_t>(td_.chanRows - m0 < td_.rowsPerLoop ? td_.chanRows - m0
                                                                                         : td_.rowsPerLoop);
                LoadChannelTile(b, m0, rows, col0, len);
                LocalTensor<T> xLocal = inQueueX.DeQue<T>();
                LocalTensor<int8_t> yLocal = outQueueY.AllocTensor<int8_t>();
                for (uint32_t r = 0; r < rows; ++r) {
                    ChannelRow(xLocal, r, pitchX, len);
                    LocalTensor<float> xF = xFpBuf.Get<float>();
                    if (f8_) {
                        Div(xF, xF, invBuf.Get<float>(), len);
                        PipeBarrier<PIPE_V>();
                        Add(xF, xF, dmaxBuf.Get<float>(), len);
                        PipeBarrier<PIPE_V>();
                        FloatToFloat8(yLocal[r * pitchY], xF, td_.outType, len);
                        PipeBarrier<PIPE_V>();
                    } else {
                        Mul(xF, xF, invBuf.Get<float>(), len);
                        PipeBarrier<PIPE_V>();
                        ToInt(yLocal[r * pitchY], xF, len);
                    }
                }
                outQueueY.EnQue(yLocal);
                inQueueX.FreeTensor(xLocal);
                yLocal = outQueueY.DeQue<int8_t>();
                uint64_t rowBytes = YBytes(td_.numCols);
                DataCopyExtParams p{static_cast<uint16_t>(rows), static_cast<uint32_t>(YBytes(len)), 0,
                                    static_cast<uint32_t>(rowBytes - YBytes(len)), 0};
                DataCopyPad(yGm[(b * td_.chanRows + m0) * rowBytes + YBytes(col0)], yLocal, p);
                outQueueY.FreeTensor(yLocal);
            }
        }
    }

    TPipe pipe;
    TQue<QuePosition::VECIN, BUFFER_NUM> inQueueX;
    TQue<QuePosition::VECOUT, BUFFER_NUM> outQueueY, outQueueScale;
    TBuf<TPosition::VECCALC> smoothBuf, smoothFpBuf, xFpBuf, absBuf, halfBuf, reduceWorkBuf, scalarBuf, zeroBuf;
    TBuf<TPosition::VECCALC> colMaxBuf, invBuf, dmaxBuf;
    GlobalTensor<T> xGm, smoothGm;
    GlobalTensor<int8_t> yGm;
    GlobalTensor<float> scaleGm, offsetGm;
    GlobalTensor<int32_t> groupGm;
    DynamicQuantTilingData td_{};
    uint64_t start_ = 0, count_ = 0;
    uint32_t pitchX_ = 0, pitchY_ = 0, pitchF_ = 0, group_ = 0;
    float dmax_ = 127.0f, inv8_ = 0.0f;
    bool hasOffset_ = false, f8_ = false;
};

}  // namespace opsdk_ascendc
