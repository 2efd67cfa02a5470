// npu_rotary_mul row kernel (torch-free): y = A(x) * c + B(x) * s over one row of d
// elements, float32 inside, one rounding to T. T is float, bf16 or fp16; c / s are rows of
// T (the launcher rounds cos / sin to the input's dtype first, the contract's rule).
#pragma once

#include "simd.h"

namespace opk {

// rotary_mode as aclnn numbers it (op_sdk/ops/rotary_mul.py MODES).
enum RotaryMode : int { kRotaryHalf = 0, kRotaryInterleave = 1, kRotaryQuarter = 2,
                        kRotaryInterleaveHalf = 3 };

}  // namespace opk

#define OPK_KERNEL_BODY "rotary.inl"
#include "isa_expand.h"

namespace opk {

// `rows` consecutive rows of x / y (d apart); row r reads c / s at r * cs_stride (0: every
// row the same cos / sin, as the heads of one token). scratch: 2 * d floats (the
// interleaved modes' A(x) / B(x)); unused by half / quarter.
template <typename T>
void rotary_rows(const T* x, const T* c, const T* s, int64_t cs_stride, T* y, int64_t rows,
                 int64_t d, int mode, float* scratch) {
  OPK_ISA_CALL(rotary_rows, x, c, s, cs_stride, y, rows, d, mode, scratch);
}

}  // namespace opk
