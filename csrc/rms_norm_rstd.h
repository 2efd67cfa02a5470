// The rstd output of the RMS norms (npu_rms_norm, npu_add_rms_norm, npu_add_rms_norm_cast;
// csrc/rms_norm.cpp, csrc/add_rms_norm.cpp, csrc/add_rms_norm_cast.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace opsdk {

// rstd keeps the reduced dims: input.shape[:k] + [1] * gamma.dim()
inline at::Tensor empty_rstd(const at::Tensor& x, const at::Tensor& gamma) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - gamma.dim());
  shape.insert(shape.end(), gamma.dim(), 1);
  return at::empty(shape, x.options().dtype(at::kFloat));
}

}  // namespace opsdk
