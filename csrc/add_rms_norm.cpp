// CPU launcher of npu_add_rms_norm: check the contract (op_sdk/ops/add_rms_norm.py has the
// same rules), then add_rms_norm_launch (csrc/add_rms_norm_launch.h): inputs made
// contiguous, the dtype dispatched, rows split over threads, the row kernel of
// kernels/rms_norm.h.
#include <torch/library.h>

#include "add_rms_norm_launch.h"
#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "rms_norm_rstd.h"

namespace opsdk {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor> npu_add_rms_norm(const Tensor& x1, const Tensor& x2,
                                                    const Tensor& gamma, double epsilon) {
  check_add_rms_norm("npu_add_rms_norm", x1, x2, gamma, /*half_only=*/false);
  LikeOutput y = output_like(x1, x1.scalar_type()), xo = output_like(x1, x1.scalar_type());
  Tensor rstd = empty_rstd(x1, gamma);
  add_rms_norm_launch(x1, x2, gamma, epsilon, &y, nullptr, rstd, xo);
  return {y.finish(), rstd, xo.finish()};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_add_rms_norm, &npu_add_rms_norm, kDifferentiable);

}  // namespace opsdk
