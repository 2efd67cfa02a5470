// CPU launcher of npu_gemma_rms_norm: check the contract (op_sdk/ops/gemma_rms_norm.py has the
// same rules), make inputs contiguous, dispatch the dtype, split rows over threads and call
// npu_rms_norm's row kernel (kernels/rms_norm.h) with the weight 1 + gamma, summed in fp32
// once per call as the reference's gamma_weight sums it (op_sdk/ops/_norm.py).
#include <torch/library.h>

#include <limits>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "rms_norm.h"
#include "rms_norm_rstd.h"

namespace opsdk {
namespace {

using at::Tensor;

void check_gemma_rms_norm(const Tensor& input, const Tensor& gamma) {
  const char* op = "npu_gemma_rms_norm";
  check_float_dtype(input, op, "input", /*half_only=*/false);
  OPK_CHECK(input.dim() >= 1 && input.dim() <= 8, op, "input", "must have 1 to 8 dims, got ",
            input.dim());
  OPK_CHECK(gamma.scalar_type() == input.scalar_type(), op, "gamma",
            "must have the dtype of 'input' (", dtype_name(input.scalar_type()), "), got ",
            dtype_name(gamma.scalar_type()));
  check_gamma(op, input, gamma, "input");
}

std::tuple<Tensor, Tensor> npu_gemma_rms_norm(const Tensor& input, const Tensor& gamma,
                                              double epsilon) {
  check_gemma_rms_norm(input, gamma);
  const Tensor x = input.contiguous();
  const Tensor w = gamma.to(at::kFloat).add(1.0).contiguous();  // 1 + gamma in fp32
  const int64_t n = w.numel(), rows = leading_numel(x, gamma.dim());
  LikeOutput y = output_like(input, input.scalar_type());
  Tensor rstd = empty_rstd(x, gamma);
  if (n == 0) rstd.fill_(std::numeric_limits<float>::quiet_NaN());  // mean of nothing
  if (rows > 0 && n > 0) {
    dispatch_float(x.scalar_type(), [&](auto tx) {
      using T = decltype(tx);
      const bool stream = stream_friendly(y.work, n);
      parallel_rows(rows, n, [&](int64_t b, int64_t e) {
        opk::rms_norm_rows<T, float>(ptr<T>(x) + b * n, ptr<float>(w), ptr<T>(y.work) + b * n,
                                     ptr<float>(rstd) + b, e - b, n, float(epsilon), stream);
      });
    });
  }
  return {y.finish(), rstd};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_gemma_rms_norm, &npu_gemma_rms_norm, kDifferentiable);

}  // namespace opsdk
