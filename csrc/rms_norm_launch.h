// The launch shared by npu_rms_norm (csrc/rms_norm.cpp) and npu_gemma_rms_norm
// (csrc/gemma_rms_norm.cpp, which passes its weight 1 + gamma in fp32), after their checks:
// inputs made contiguous, the dtype dispatched, rows split over threads, the row kernel of
// kernels/rms_norm.h.
#pragma once

#include <ATen/ATen.h>

#include <limits>
#include <tuple>

#include "launch.h"
#include "rms_norm.h"
#include "rms_norm_rstd.h"

namespace opsdk {

// npu_rms_norm's (x, gamma) dtype pairs: gamma of x's dtype, or float32 for a half x
// (op_sdk/ops/rms_norm.py _RMS_NORM_DTYPES; op_sdk::rms_norm_rope takes the same).
inline bool rms_norm_gamma_pairs(c10::ScalarType xt, c10::ScalarType gt) {
  return gt == xt || (gt == at::kFloat && (xt == at::kHalf || xt == at::kBFloat16));
}

// (y, rstd): y = x * rstd * weight over the weight's dims (the weight of input's dtype or
// fp32), in input's layout; rstd keeps the reduced dims.
inline std::tuple<at::Tensor, at::Tensor> rms_norm_run(const at::Tensor& input,
                                                       const at::Tensor& weight,
                                                       double epsilon) {
  const at::Tensor x = input.contiguous(), g = weight.contiguous();
  const int64_t n = g.numel(), rows = leading_numel(x, g.dim());
  LikeOutput y = output_like(input, input.scalar_type());
  at::Tensor rstd = empty_rstd(x, g);
  if (n == 0) rstd.fill_(std::numeric_limits<float>::quiet_NaN());  // mean of nothing
  if (rows > 0 && n > 0) {
    dispatch_float(x.scalar_type(), [&](auto tx) {
      using T = decltype(tx);
      const bool stream = stream_friendly(y.work, n);
      auto run = [&](auto tg) {
        using G = decltype(tg);
        parallel_rows(rows, n, [&](int64_t b, int64_t e) {
          opk::rms_norm_rows<T, G>(ptr<T>(x) + b * n, ptr<G>(g), ptr<T>(y.work) + b * n,
                                   ptr<float>(rstd) + b, e - b, n, float(epsilon), stream);
        });
      };
      if (g.scalar_type() == at::kFloat) run(float{});
      else run(T{});
    });
  }
  return {y.finish(), rstd};
}

}  // namespace opsdk
