// The cos / sin rule shared by the fast forms of the rotary launchers (csrc/rotary_mul.cpp,
// csrc/rms_norm_rope.cpp): op_sdk/ops/rotary_mul.py's check_rotary_mul, as a yes / no (the
// launchers send every other call to the operator's reference, which raises its error).
#pragma once

#include <ATen/ATen.h>

#include "checks.h"

namespace opsdk {

constexpr int64_t kRotaryMaxD = 1024;  // the longest last dim (MAX_D)

// r a float tensor of x's rank, its last dim x's and each other dim x's or 1.
inline bool rotary_table_fits(const at::Tensor& r, const at::Tensor& x) {
  if (!is_float_dtype(r.scalar_type()) || r.dim() != x.dim() || r.size(-1) != x.size(-1)) return false;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (r.size(i) != 1 && r.size(i) != x.size(i)) return false;
  return true;
}

// r1 / r2 (cos / sin) of one shape, each fitting x.
inline bool rotary_tables_fit(const at::Tensor& r1, const at::Tensor& r2, const at::Tensor& x) {
  return r2.sizes() == r1.sizes() && rotary_table_fits(r1, x) && rotary_table_fits(r2, x);
}

}  // namespace opsdk
