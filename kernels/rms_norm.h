// npu_rms_norm / npu_add_rms_norm / npu_add_rms_norm_cast row kernels (torch-free).
// Pointers are to contiguous rows of n elements; T is float, bf16 or fp16; G is T or float.
#pragma once

#include "simd.h"

#define OPK_KERNEL_BODY "rms_norm.inl"
#include "isa_expand.h"

namespace opk {

// stream: non-temporal stores for the outputs (rows of n % 16 == 0, 64-byte aligned).
template <typename T, typename G>
void rms_norm_rows(const T* x, const G* gamma, T* y, float* rstd, int64_t rows, int64_t n,
                   float eps, bool stream = false) {
  OPK_ISA_CALL(rms_norm_rows, x, gamma, y, rstd, rows, n, eps, stream);
}

// y and y32 may be null (not written); xo is x1 + x2 rounded to T.
template <typename T>
void add_rms_norm_rows(const T* x1, const T* x2, const T* gamma, T* y, float* y32,
                       float* rstd, T* xo, int64_t rows, int64_t n, float eps,
                       bool stream = false) {
  OPK_ISA_CALL(add_rms_norm_rows, x1, x2, gamma, y, y32, rstd, xo, rows, n, eps, stream);
}

}  // namespace opk
