// npu_kv_rmsnorm_rope_cache's row kernel (torch-free): one token's RMSNorm of its first dv
// values and interleaved RoPE of its last dk, each rounded to T, and their int8 cache rows
// where a scale is given. T is bf16 or fp16.
#pragma once

#include "simd.h"

#define OPK_KERNEL_BODY "kv_rmsnorm_rope.inl"
#include "isa_expand.h"

namespace opk {

// x: the token's dv + dk values; g: gamma in float; c / s: its cos / sin rows of dk.
// vq / kq (with vs / ks): the int8 rows of c_kv / k_rope, or null. scratch: 2 * dk floats.
template <typename T>
void kv_rmsnorm_rope_row(const T* x, const float* g, const T* c, const T* s, T* c_kv,
                         T* k_rope, int8_t* vq, const float* vs, int8_t* kq, const float* ks,
                         int64_t dv, int64_t dk, float recip, float eps, float* scratch) {
  OPK_ISA_CALL(kv_rmsnorm_rope_row, x, g, c, s, c_kv, k_rope, vq, vs, kq, ks, dv, dk, recip,
               eps, scratch);
}

}  // namespace opk
