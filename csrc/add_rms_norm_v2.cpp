// CPU launcher of npu_add_rms_norm_v2_functional: npu_add_rms_norm's checks and launch
// (add_rms_norm_run, csrc/add_rms_norm_launch.h), its results returned as (rstd, y, x)
// (op_sdk/ops/add_rms_norm_v2.py). The in-place npu_add_rms_norm_v2 is derived from it by
// op_sdk.library (the new values copied into x1 and x2).
#include <torch/library.h>

#include "add_rms_norm_launch.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor> npu_add_rms_norm_v2_functional(const Tensor& x1,
                                                                  const Tensor& x2,
                                                                  const Tensor& gamma,
                                                                  double epsilon) {
  auto [y, rstd, x] = add_rms_norm_run("npu_add_rms_norm_v2_functional", x1, x2, gamma, epsilon);
  return {rstd, y, x};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_add_rms_norm_v2_functional, &npu_add_rms_norm_v2_functional,
                kNotDifferentiable);

}  // namespace opsdk
