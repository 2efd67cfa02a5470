// The launch shared by npu_add_rms_norm (csrc/add_rms_norm.cpp) and npu_add_rms_norm_cast
// (csrc/add_rms_norm_cast.cpp), after their checks: inputs made contiguous, the dtype
// dispatched, rows split over threads, the row kernel of kernels/rms_norm.h.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <limits>

#include "checks.h"
#include "launch.h"
#include "rms_norm.h"
#include "rms_norm_rstd.h"

namespace opsdk {

// y (x1's dtype) and / or y32 (fp32) from the unrounded sum, rstd, x = the rounded sum.
inline void add_rms_norm_launch(const at::Tensor& x1, const at::Tensor& x2,
                                const at::Tensor& gamma, double epsilon, LikeOutput* y,
                                LikeOutput* y32, const at::Tensor& rstd, LikeOutput& xo) {
  const at::Tensor a = x1.contiguous(), b = x2.contiguous(), g = gamma.contiguous();
  const int64_t n = g.numel(), rows = leading_numel(a, g.dim());
  if (n == 0) rstd.fill_(std::numeric_limits<float>::quiet_NaN());
  if (rows == 0 || n == 0) return;
  const bool stream = stream_friendly(xo.work, n) && (!y || stream_friendly(y->work, n)) &&
                      (!y32 || stream_friendly(y32->work, n));
  dispatch_float(a.scalar_type(), [&](auto tx) {
    using T = decltype(tx);
    parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
      const int64_t off = r0 * n;
      opk::add_rms_norm_rows<T>(ptr<T>(a) + off, ptr<T>(b) + off, ptr<T>(g),
                                y ? ptr<T>(y->work) + off : nullptr,
                                y32 ? ptr<float>(y32->work) + off : nullptr,
                                ptr<float>(rstd) + r0, ptr<T>(xo.work) + off, r1 - r0, n,
                                float(epsilon), stream);
    });
  });
}

// npu_add_rms_norm's checks (under ``op``'s name), outputs and launch: (y, rstd, x), as
// npu_add_rms_norm returns them (npu_add_rms_norm_v2_functional reorders them).
inline std::tuple<at::Tensor, at::Tensor, at::Tensor> add_rms_norm_run(
    const char* op, const at::Tensor& x1, const at::Tensor& x2, const at::Tensor& gamma,
    double epsilon) {
  check_add_rms_norm(op, x1, x2, gamma, /*half_only=*/false);
  LikeOutput y = output_like(x1, x1.scalar_type()), xo = output_like(x1, x1.scalar_type());
  at::Tensor rstd = empty_rstd(x1, gamma);
  add_rms_norm_launch(x1, x2, gamma, epsilon, &y, nullptr, rstd, xo);
  return {y.finish(), rstd, xo.finish()};
}

}  // namespace opsdk
