// CPU launchers of npu_rms_norm, npu_add_rms_norm, npu_add_rms_norm_cast: check the
// contract (op_sdk/ops/rms_norm.py has the same rules), make inputs contiguous, dispatch
// the dtype, split rows over threads, call the row kernels of kernels/rms_norm.h.
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "rms_norm.h"

namespace opsdk {
namespace {

using at::Tensor;

// rstd keeps the reduced dims: input.shape[:k] + [1] * gamma.dim()
Tensor empty_rstd(const Tensor& x, const Tensor& gamma) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - gamma.dim());
  shape.insert(shape.end(), gamma.dim(), 1);
  return at::empty(shape, x.options().dtype(at::kFloat));
}

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

// y (x1's dtype) and / or y32 (fp32) from the unrounded sum, rstd, x = the rounded sum.
void add_rms_norm_launch(const Tensor& x1, const Tensor& x2, const Tensor& gamma,
                         double epsilon, LikeOutput* y, LikeOutput* y32, const Tensor& rstd,
                         LikeOutput& xo) {
  const Tensor a = x1.contiguous(), b = x2.contiguous(), g = gamma.contiguous();
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

std::tuple<Tensor, Tensor, Tensor> npu_add_rms_norm(const Tensor& x1, const Tensor& x2,
                                                    const Tensor& gamma, double epsilon) {
  check_add_rms_norm("npu_add_rms_norm", x1, x2, gamma, /*half_only=*/false);
  LikeOutput y = output_like(x1, x1.scalar_type()), xo = output_like(x1, x1.scalar_type());
  Tensor rstd = empty_rstd(x1, gamma);
  add_rms_norm_launch(x1, x2, gamma, epsilon, &y, nullptr, rstd, xo);
  return {y.finish(), rstd, xo.finish()};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> npu_add_rms_norm_cast(const Tensor& x1,
                                                                 const Tensor& x2,
                                                                 const Tensor& gamma,
                                                                 double epsilon) {
  check_add_rms_norm("npu_add_rms_norm_cast", x1, x2, gamma, /*half_only=*/true);
  LikeOutput y1 = output_like(x1, at::kFloat), y2 = output_like(x1, x1.scalar_type()),
             xo = output_like(x1, x1.scalar_type());
  Tensor rstd = empty_rstd(x1, gamma);
  add_rms_norm_launch(x1, x2, gamma, epsilon, &y2, &y1, rstd, xo);
  return {y1.finish(), y2.finish(), rstd, xo.finish()};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_rms_norm, &npu_rms_norm, kDifferentiable);
OPSDK_NATIVE_OP(npu, npu_add_rms_norm, &npu_add_rms_norm, kDifferentiable);
OPSDK_NATIVE_OP(npu, npu_add_rms_norm_cast, &npu_add_rms_norm_cast, kNotDifferentiable);

}  // namespace opsdk
