// CPU launcher of npu_rms_norm_dynamic_mx_quant: the fp32 norm (times gamma, plus beta)
// rounded to x's dtype, MX quantised along the last dim in blocks of 32, by the row kernel
// of kernels/mx_quant.h; every call outside norm_mx_form() goes to the reference.
#include <torch/library.h>

#include "norm_mx_launch.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor> npu_rms_norm_dynamic_mx_quant(
    const Tensor& x, const Tensor& gamma, const std::optional<Tensor>& beta, double epsilon,
    int64_t scale_alg, c10::string_view round_mode, int64_t dst_type) {
  const auto form = norm_mx_form(x, nullptr, gamma, beta, scale_alg, round_mode, dst_type);
  if (!form.has_value()) {
    static const auto reference = reference_op<decltype(npu_rms_norm_dynamic_mx_quant)>(
        "npu_rms_norm_dynamic_mx_quant");
    return reference.call(x, gamma, beta, epsilon, scale_alg, round_mode, dst_type);
  }
  auto [y, scale, rstd, unused] = norm_mx_run(x, nullptr, gamma, beta, epsilon, *form);
  return {y, scale, rstd};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_rms_norm_dynamic_mx_quant, &npu_rms_norm_dynamic_mx_quant,
                kNotDifferentiable);

}  // namespace opsdk
