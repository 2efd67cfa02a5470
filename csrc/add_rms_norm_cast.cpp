// CPU launcher of npu_add_rms_norm_cast: check the contract (op_sdk/ops/add_rms_norm_cast.py
// has the same rules), then add_rms_norm_launch (csrc/add_rms_norm_launch.h): inputs made
// contiguous, the dtype dispatched, rows split over threads, the row kernel of
// kernels/rms_norm.h writing both the fp32 and the x1-dtype output.
#include <torch/library.h>

#include "add_rms_norm_launch.h"
#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "rms_norm_rstd.h"

namespace opsdk {
namespace {

using at::Tensor;

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

OPSDK_NATIVE_OP(npu, npu_add_rms_norm_cast, &npu_add_rms_norm_cast, kNotDifferentiable);

}  // namespace opsdk
