// npu_dynamic_quant / npu_quantize row kernels (torch-free). Rows are contiguous with n
// elements; T is float, bf16 or fp16; smooth scales S are T or float.
#pragma once

#include "simd.h"

#define OPK_KERNEL_BODY "quant.inl"
#include "isa_expand.h"

namespace opk {

// Per token: scale[r] = max_j |x*smooth| / dmax; y = rint(x*smooth * dmax/amax).
// Exactly one of y8 (int8, n per row) and y4 (int4 packed, n/8 int32 per row) is non-null.
template <typename T, typename S>
void dynamic_quant_rows(const T* x, const S* smooth, int8_t* y8, int32_t* y4, float* scale,
                        int64_t rows, int64_t n, float dmax) {
  OPK_ISA_CALL(dynamic_quant_rows, x, smooth, y8, y4, scale, rows, n, dmax);
}

template <typename T, typename S>
float absmax_rows(const T* x, const S* smooth, int64_t rows, int64_t n) {
  return OPK_ISA_CALL(absmax_rows, x, smooth, rows, n);
}

template <typename T, typename S>
void colmax_rows(const T* x, int64_t ld, const S* smooth, int64_t rows, int64_t ncols,
                 float* colmax) {
  OPK_ISA_CALL(colmax_rows, x, ld, smooth, rows, ncols, colmax);
}

template <typename T, typename S>
void quant_rows_mul(const T* x, const S* smooth, float mul, const float* colmul, int8_t* y8,
                    int32_t* y4, int64_t rows, int64_t n, float dmax) {
  OPK_ISA_CALL(quant_rows_mul, x, smooth, mul, colmul, y8, y4, rows, n, dmax);
}

template <typename T, typename O>
void quantize_rows_percol(const T* x, const float* s, const float* zp, bool div, O* out,
                          int32_t* out4, int64_t rows, int64_t n, float lo, float hi) {
  OPK_ISA_CALL(quantize_rows_percol, x, s, zp, div, out, out4, rows, n, lo, hi);
}

template <typename T, typename O>
void quantize_run(const T* x, float s, float zp, bool div, O* out, int32_t* out4, int64_t len,
                  float lo, float hi) {
  OPK_ISA_CALL(quantize_run, x, s, zp, div, out, out4, len, lo, hi);
}

}  // namespace opk
