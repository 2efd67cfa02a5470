// CPU launcher of npu_add_rms_norm_dynamic_mx_quant: x1 + x2 in fp32 (its rounding the
// x_out output), its norm (times gamma, plus beta) rounded to x1's dtype, MX quantised along
// the last dim in blocks of 32, by the row kernel of kernels/mx_quant.h; every call outside
// norm_mx_form() goes to the reference.
#include <torch/library.h>

#include "norm_mx_launch.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor, Tensor> npu_add_rms_norm_dynamic_mx_quant(
    const Tensor& x1, const Tensor& x2, const Tensor& gamma, const std::optional<Tensor>& beta,
    double epsilon, int64_t scale_alg, c10::string_view round_mode, int64_t dst_type) {
  const auto form = norm_mx_form(x1, &x2, gamma, beta, scale_alg, round_mode, dst_type);
  if (!form.has_value()) {
    static const auto reference = reference_op<decltype(npu_add_rms_norm_dynamic_mx_quant)>(
        "npu_add_rms_norm_dynamic_mx_quant");
    return reference.call(x1, x2, gamma, beta, epsilon, scale_alg, round_mode, dst_type);
  }
  auto [y, scale, rstd, x_out] = norm_mx_run(x1, &x2, gamma, beta, epsilon, *form);
  return {y, x_out, scale, rstd};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_add_rms_norm_dynamic_mx_quant, &npu_add_rms_norm_dynamic_mx_quant,
                kNotDifferentiable);

}  // namespace opsdk
