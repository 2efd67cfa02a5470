// CPU launcher of npu_gemma_rms_norm: check the contract (op_sdk/ops/gemma_rms_norm.py has the
// same rules), then npu_rms_norm's launch (rms_norm_run, csrc/rms_norm_launch.h) with the
// weight 1 + gamma, summed in fp32 once per call as the reference's gamma_weight sums it
// (op_sdk/ops/_norm.py).
#include <torch/library.h>

#include "checks.h"
#include "registry.h"
#include "rms_norm_launch.h"

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
  // the weight 1 + gamma, summed in fp32 once per call (the reference's gamma_weight)
  return rms_norm_run(input, gamma.to(at::kFloat).add(1.0), epsilon);
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_gemma_rms_norm, &npu_gemma_rms_norm, kDifferentiable);

}  // namespace opsdk
