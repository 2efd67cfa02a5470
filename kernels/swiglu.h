// npu_swiglu / npu_swiglu_backward / npu_swiglu_quant / npu_clipped_swiglu /
// npu_dequant_swiglu_quant kernels (torch-free): silu(a) * b of the two halves of a
// row, and its gradient, float32 inside, one rounding to T (float, bf16 or fp16).
#pragma once

#include "simd.h"

namespace opk {

// npu_dequant_swiglu_quant's per-call parameters over rows of 2n (see swiglu.inl); a pointer
// is null where the input is absent. weight_scale / bias_int / bias_float hold 2n values,
// act_scale one per row; quant_scale / quant_offset n values (per_channel) or one.
struct DequantSwigluQuantParams {
  const float* weight_scale = nullptr;
  const float* act_scale = nullptr;
  const int32_t* bias_int = nullptr;
  const float* bias_float = nullptr;
  int mode = 0;  // swiglu_mode: 0 silu(A) * B, 1 clipped even / odd, 2 clipped halves
  bool left = false;
  float alpha = 1.702f, limit = 7.0f, glu_bias = 1.0f;
  const float* quant_scale = nullptr;
  bool quant_scale_per_channel = false;
  const float* quant_offset = nullptr;
  bool quant_offset_per_channel = false;
  bool dynamic = false;
};

}  // namespace opk

#define OPK_KERNEL_BODY "swiglu.inl"
#include "isa_expand.h"

namespace opk {

// y[j] = silu(a[j]) * b[j], j < n.
template <typename T>
void swiglu_span(const T* a, const T* b, T* y, int64_t n) {
  OPK_ISA_CALL(swiglu_span, a, b, y, n);
}

// With s = sigmoid(a): da = g (s + s (1 - s) a) b, db = g s a.
template <typename T>
void swiglu_backward_span(const T* g, const T* a, const T* b, T* da, T* db, int64_t n) {
  OPK_ISA_CALL(swiglu_backward_span, g, a, b, da, db, n);
}

// npu_clipped_swiglu (see swiglu.inl): y[j] = f(a[j], b[j]) of two halves, j < n
template <typename T>
void clipped_swiglu_span(const T* a, const T* b, T* y, int64_t n, float alpha, float limit,
                         float bias) {
  OPK_ISA_CALL(clipped_swiglu_span, a, b, y, n, alpha, limit, bias);
}

// ... and y[j] = f(x[2j], x[2j + 1]) of interleaved pairs, j < n
template <typename T>
void clipped_swiglu_pairs(const T* x, T* y, int64_t n, float alpha, float limit, float bias) {
  OPK_ISA_CALL(clipped_swiglu_pairs, x, y, n, alpha, limit, bias);
}

// npu_swiglu_quant of rows of 2n elements (see swiglu.inl): smooth / offset null, one value
// (per tensor) or n (per_channel); offset only in static mode (dynamic false).
template <typename T>
void swiglu_quant_rows(const T* x, int64_t rows, int64_t n, bool left, const float* smooth,
                       bool per_channel, const float* offset, bool dynamic, int8_t* y,
                       float* scale) {
  OPK_ISA_CALL(swiglu_quant_rows, x, rows, n, left, smooth, per_channel, offset, dynamic, y,
               scale);
}

// npu_dequant_swiglu_quant of rows of 2n (x int32, bf16 or fp16; see swiglu.inl): y (n per
// row) and scale (one per row)
template <typename T>
void dequant_swiglu_quant_rows(const T* x, int64_t rows, int64_t n,
                               const DequantSwigluQuantParams& p, int8_t* y, float* scale) {
  OPK_ISA_CALL(dequant_swiglu_quant_rows, x, rows, n, p, y, scale);
}

}  // namespace opk
