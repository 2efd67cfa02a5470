// The launch shared by npu_rms_norm_dynamic_mx_quant and npu_add_rms_norm_dynamic_mx_quant
// (csrc/rms_norm_dynamic_mx_quant.cpp, csrc/add_rms_norm_dynamic_mx_quant.cpp): which calls
// the row kernel of kernels/mx_quant.h computes, the outputs, the dtype dispatch and the
// threading. norm_mx_form() only says which valid calls the kernel takes; every other call
// (every call breaking a rule among them) goes to the operator's reference, which holds the
// rules and their words (op_sdk/ops/rms_norm_dynamic_mx_quant.py check_norm_mx).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <tuple>

#include "checks.h"
#include "launch.h"
#include "mx_form.h"

namespace opsdk {

// x (and x2) float16 / bfloat16 of 1 - 7 dims, gamma 1-D over the last dim in x's dtype or
// float32, beta gamma's shape and dtype, a kernel's MX form
inline std::optional<opk::MxForm> norm_mx_form(const at::Tensor& x, const at::Tensor* x2,
                                               const at::Tensor& gamma,
                                               const std::optional<at::Tensor>& beta,
                                               int64_t scale_alg, c10::string_view round_mode,
                                               int64_t dst_type) {
  const auto xt = x.scalar_type();
  if (!is_half_dtype(xt) || x.dim() < 1 || x.dim() > 7) return std::nullopt;
  if (x2 != nullptr && (x2->scalar_type() != xt || !x2->sizes().equals(x.sizes())))
    return std::nullopt;
  if (gamma.dim() != 1 || gamma.size(0) != x.size(-1)) return std::nullopt;
  if (gamma.scalar_type() != xt && gamma.scalar_type() != at::kFloat) return std::nullopt;
  if (beta.has_value() && (beta->dim() != 1 || beta->size(0) != x.size(-1) ||
                           beta->scalar_type() != gamma.scalar_type()))
    return std::nullopt;
  const auto form = mx_form(dst_type, round_mode, scale_alg);
  if (form.has_value() && opk::mx_fp4(form->dst) && x.size(-1) % 2 != 0) return std::nullopt;
  return form;
}

// (y, mxscale, rstd, x_out): x_out (x1 + x2 rounded, in x1's layout) only with x2
inline std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> norm_mx_run(
    const at::Tensor& x1, const at::Tensor* x2, const at::Tensor& gamma,
    const std::optional<at::Tensor>& beta, double epsilon, const opk::MxForm& f) {
  const at::Tensor a = x1.contiguous(), g = gamma.contiguous();
  const at::Tensor b = x2 != nullptr ? x2->contiguous() : at::Tensor();
  const auto bt = contiguous_or_none(beta);
  const int64_t n = a.size(-1), rows = leading_numel(a, 1);
  auto [y, scale] = mx_outputs(x1, f.dst);
  std::vector<int64_t> r_shape(a.sizes().begin(), a.sizes().end() - 1);
  r_shape.push_back(1);
  at::Tensor rstd = at::empty(r_shape, a.options().dtype(at::kFloat));
  LikeOutput xo = x2 != nullptr ? output_like(x1, x1.scalar_type()) : LikeOutput{};
  if (n == 0) rstd.fill_(std::numeric_limits<float>::quiet_NaN());  // mean of nothing
  if (rows > 0 && n > 0) {
    uint8_t* yp = reinterpret_cast<uint8_t*>(y.work.data_ptr());
    uint8_t* sp = scale.data_ptr<uint8_t>();
    const int64_t y_row = opk::mx_y_row(f.dst, n), s_row = opk::mx_scale_row(n);
    dispatch_float(a.scalar_type(), [&](auto tx) {
      using T = decltype(tx);
      if constexpr (!std::is_same<T, float>::value) {
        auto run = [&](auto tg) {
          using G = decltype(tg);
          parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
            opk::norm_mx_quant_rows<T, G>(
                ptr<T>(a) + r0 * n, x2 != nullptr ? ptr<T>(b) + r0 * n : nullptr, ptr<G>(g),
                ptr_or_null<G>(bt), yp + r0 * y_row, sp + r0 * s_row, ptr<float>(rstd) + r0,
                x2 != nullptr ? ptr<T>(xo.work) + r0 * n : nullptr, r1 - r0, n,
                float(epsilon), f);
          });
        };
        if (g.scalar_type() == at::kFloat) run(float{});
        else run(T{});
      }
    });
  }
  return {y.finish(), scale, rstd, x2 != nullptr ? xo.finish() : at::Tensor()};
}

}  // namespace opsdk
