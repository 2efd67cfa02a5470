// op_sdk::rms_norm_rope row kernel (torch-free): per row of d elements, npu_rms_norm's y
// (fp32 norm, rounded to T), then npu_rotary_mul's "half" rotation of it (fp32, one
// rounding). Built on the two operators' own pieces (kernels/rms_norm.h: the sum of squares,
// rstd and `normed`; kernels/rotary.h: rotate_halves_of), so it is bit for bit their chain.
#pragma once

#include "rms_norm.h"
#include "rotary.h"

#define OPK_KERNEL_BODY "rms_norm_rope.inl"
#include "isa_expand.h"

namespace opk {

// `rows` rows: row r of x at x + r * x_stride (its d elements contiguous), its cos / sin at
// r * cs_stride, its output at y + r * d. gamma: d elements of T or float. scratch: 6 * d
// floats per thread (kRopeRows = 4 up-cast rows, a cos and a sin row). stream: non-temporal stores of y (rows of d % 32 == 0, 64-byte
// aligned; a fence follows).
template <typename T, typename G>
void rms_norm_rope_rows(const T* x, int64_t x_stride, const G* gamma, const T* c, const T* s,
                        int64_t cs_stride, T* y, int64_t rows, int64_t d, float eps,
                        float* scratch, bool stream) {
  OPK_ISA_CALL(rms_norm_rope_rows, x, x_stride, gamma, c, s, cs_stride, y, rows, d, eps,
               scratch, stream);
}

}  // namespace opk
