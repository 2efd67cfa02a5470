// CPU launcher of npu_rms_norm: check the contract (op_sdk/ops/rms_norm.py has the same
// rules), then rms_norm_run (csrc/rms_norm_launch.h): inputs made contiguous, the dtype
// dispatched, rows split over threads, the row kernel of kernels/rms_norm.h.
#include <torch/library.h>

#include "checks.h"
#include "registry.h"
#include "rms_norm_launch.h"

namespace opsdk {
namespace {

using at::Tensor;

void check_rms_norm(const Tensor& input, const Tensor& gamma) {
  const char* op = "npu_rms_norm";
  OPK_CHECK(input.dim() >= 1, op, "input", "must have at least 1 dim");
  const auto xt = input.scalar_type(), gt = gamma.scalar_type();
  OPK_CHECK(is_float_dtype(xt) && rms_norm_gamma_pairs(xt, gt), op, "gamma",
            "dtype must pair with 'input' as (float16, float32), (bfloat16, float32), "
            "(float16, float16), (bfloat16, bfloat16) or (float32, float32); got (",
            dtype_name(xt), ", ", dtype_name(gt), ")");
  check_gamma(op, input, gamma, "input");
}

std::tuple<Tensor, Tensor> npu_rms_norm(const Tensor& input, const Tensor& gamma,
                                        double epsilon) {
  check_rms_norm(input, gamma);
  return rms_norm_run(input, gamma, epsilon);
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_rms_norm, &npu_rms_norm, kDifferentiable);

}  // namespace opsdk
