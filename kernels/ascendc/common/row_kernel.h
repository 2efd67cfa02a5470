// The row skeleton of the row kernels under kernels/ascendc/ (Ascend C): this block's rows,
// the tile shape of the two tiling keys (common/tiling_common.h) and the loops over them.
//
//   key 1 (TILING_KEY_WHOLE_ROW): tiles of rowsPerLoop whole rows (the last one shorter);
//   key 2 (TILING_KEY_SPLIT_ROW): one row at a time, in numChunks chunks of chunkCols
//         elements (the last one lastChunkCols), in as many passes as the kernel needs.
//
// A kernel derives from RowKernel<Kernel, TilingData> (CRTP: no virtual calls on the core),
// declares `friend RowKernel<...>;`, calls InitRows(td) first in its Init and supplies
//
//   void WholeRows(uint64_t row0, uint32_t rows);   one key-1 tile: rows [row0, row0 + rows)
//   void SplitRow(uint64_t row);                    one key-2 row (its chunks: ChunkLen, ChunkCol)
//   void BeginWholeRows() / BeginSplitRows();       optional: before the first tile / row
//
// rows count from this block's first row (the GM tensors are set at it). The TilingData has
// the fields SetRowSplit and ChooseRowTile (common/tiling_common.h) fill.
#pragma once

#include "kernel_operator.h"
#include "kernel_common.h"

namespace opsdk_ascendc {

template <typename Kernel, typename TilingData>
class RowKernel {
public:
    __aicore__ inline void Process()
    {
        if (rowCount_ == 0) return;
        Kernel &k = *static_cast<Kernel *>(this);
        if (td_.tilingKey == TILING_KEY_WHOLE_ROW) {
            k.BeginWholeRows();
            for (uint64_t row0 = 0; row0 < rowCount_; row0 += td_.rowsPerLoop) {
                uint64_t left = rowCount_ - row0;
                k.WholeRows(row0, static_cast<uint32_t>(left < td_.rowsPerLoop ? left : td_.rowsPerLoop));
            }
        } else if (td_.tilingKey == TILING_KEY_SPLIT_ROW) {
            k.BeginSplitRows();
            for (uint64_t row = 0; row < rowCount_; ++row) k.SplitRow(row);
        }
    }

protected:
    // The tiling and this block's rows (start: its first row in the whole tensor).
    __aicore__ inline RowRange InitRows(const TilingData &td)
    {
        td_ = td;
        RowRange r = BlockRows(td.rowsPerBlock, td.formerBlocks);
        rowCount_ = r.count;
        return r;
    }

    __aicore__ inline bool WholeRowKey() const { return td_.tilingKey == TILING_KEY_WHOLE_ROW; }
    // the elements of one tile row (a whole row, or a chunk) and the rows of one tile: what
    // the unified-buffer queues are sized for
    __aicore__ inline uint32_t TileCols() const { return WholeRowKey() ? td_.numCols : td_.chunkCols; }
    __aicore__ inline uint32_t TileRows() const { return WholeRowKey() ? td_.rowsPerLoop : 1; }
    // key 2: the length of chunk c, and its first column
    __aicore__ inline uint32_t ChunkLen(uint32_t c) const
    {
        return c + 1 == td_.numChunks ? td_.lastChunkCols : td_.chunkCols;
    }
    __aicore__ inline uint64_t ChunkCol(uint32_t c) const { return static_cast<uint64_t>(c) * td_.chunkCols; }
    // the element offset of (row, chunk c) in this block's rows
    __aicore__ inline uint64_t ChunkOffset(uint64_t row, uint32_t c) const { return row * td_.numCols + ChunkCol(c); }

    __aicore__ inline void BeginWholeRows() {}
    __aicore__ inline void BeginSplitRows() {}

    TilingData td_{};
    uint64_t rowCount_ = 0;
};

// One fp32 value out to GM through an output queue (a key-2 row's rstd or scale): written by
// the scalar unit, so the copy waits for it (S -> MTE3).
template <typename Queue>
__aicore__ inline void WriteScalarOut(Queue &queue, const GlobalTensor<float> &dst, float value)
{
    LocalTensor<float> t = queue.template AllocTensor<float>();
    t.SetValue(0, value);
    queue.EnQue(t);
    t = queue.template DeQue<float>();
    SetFlag<HardEvent::S_MTE3>(0);
    WaitFlag<HardEvent::S_MTE3>(0);
    CopyRowsOut(dst, t, 1, 1);
    queue.FreeTensor(t);
}

}  // namespace opsdk_ascendc
