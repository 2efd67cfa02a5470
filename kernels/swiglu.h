// npu_swiglu / npu_swiglu_backward kernels (torch-free): silu(a) * b of the two halves of a
// row, and its gradient, float32 inside, one rounding to T (float, bf16 or fp16).
#pragma once

#include "simd.h"

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

}  // namespace opk
