// CPU launcher of npu_rms_norm: check the contract (op_sdk/ops/rms_norm.py has the same
// rules), make inputs contiguous, dispatch the dtype, split rows over threads, call the
// row kernel of kernels/rms_norm.h.
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "rms_norm.h"
#include "rms_norm_rstd.h"

namespace opsdk {
namespace {

using at::Tensor;

void check_rms_norm(const Tensor& input, const Tensor& gamma) {
  const char* op = "npu_rms_norm";
  OPK_CHECK(input.dim() >= 1, op, "input", "must have at least 1 dim");
  const auto xt = input.scalar_type(), gt = gamma.scalar_type();
  const bool ok = (xt == at::kHalf && (gt == at::kFloat || gt == at::kHalf)) ||
                  (xt == at::kBFloat16 && (gt == at::kFloat || gt == at::kBFloat16)) ||
                  (xt == at::kFloat && gt == at::kFloat);
  OPK_CHECK(ok, op, "gamma",
            "dtype must pair with 'input' as (float16, float32), (bfloat16, float32), "
            "(float16, float16), (bfloat16, bfloat16) or (float32, float32); got (",
            dtype_name(xt), ", ", dtype_name(gt), ")");
  check_gamma(op, input, gamma, "input");
}

std::tuple<Tensor, Tensor> npu_rms_norm(const Tensor& input, const Tensor& gamma,
                                        double epsilon) {
  check_rms_norm(input, gamma);
  const Tensor x = input.contiguous(), g = gamma.contiguous();
  const int64_t n = g.numel(), rows = leading_numel(x, g.dim());
  LikeOutput y = output_like(input, input.scalar_type());
  Tensor rstd = empty_rstd(x, g);
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

}  // namespace

OPSDK_NATIVE_OP(npu, npu_rms_norm, &npu_rms_norm, kDifferentiable);

}  // namespace opsdk
