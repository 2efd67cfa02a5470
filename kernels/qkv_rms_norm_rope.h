// npu_qkv_rms_norm_rope_cache's row kernels (torch-free): one head's RMSNorm (dividing by
// the root of the mean) and rotate-half RoPE, and the int8 rows of a quantised cache. T is
// bf16 or fp16.
#pragma once

#include "simd.h"

#define OPK_KERNEL_BODY "qkv_rms_norm_rope.inl"
#include "isa_expand.h"

namespace opk {

// x: a head of d values; g: gamma in float; c / s: the token's cos / sin rows. y: the head
// rounded to T; y32 (or null): the float32 values before that rounding. scratch: d floats.
template <typename T>
void qk_head_norm_rope(const T* x, const float* g, const T* c, const T* s, T* y, float* y32,
                       int64_t d, float eps, float* scratch) {
  OPK_ISA_CALL(qk_head_norm_rope, x, g, c, s, y, y32, d, eps, scratch);
}

// q[i] = round_half_even(v[i] / scale[i] (+ offset[i])) saturated to int8, a NaN 0; v float
// or T; offset may be null.
template <typename V>
void quantize_divided(const V* v, const float* scale, const float* offset, int8_t* q,
                      int64_t n) {
  OPK_ISA_CALL(quantize_divided, v, scale, offset, q, n);
}

}  // namespace opk
