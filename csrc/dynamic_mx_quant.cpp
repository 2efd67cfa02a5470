// CPU launcher and row kernel of npu_dynamic_mx_quant's hot form: blocks of 32 along the
// last dim (vllm-ascend's every call), float8 outputs with scale_alg 0 or 1, float4 outputs
// with scale_alg 0, no dst_type_max / max_low_bound. The arithmetic is the contract's
// (op_sdk/ops/_mx.py, docs/operators.md "MX quantisation"), bit for bit. Every other call
// (other axes or block sizes, scale_alg 2, a dst_type_max or max_low_bound, and every call
// that breaks a rule) goes to the reference, so the rules and their words have one
// implementation: fast_form() below only says which valid calls this kernel computes.
#include <torch/library.h>

#include "checks.h"
#include "launch.h"
#include "mx_form.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

// The calls the kernel computes (all valid); std::nullopt: the reference's
std::optional<opk::MxForm> fast_form(const Tensor& x, int64_t axis, c10::string_view round_mode,
                                     int64_t dst_type, int64_t block_size,
                                     std::optional<int64_t> scale_alg, double dst_type_max,
                                     double max_low_bound) {
  if (!is_float_dtype(x.scalar_type()) || x.dim() < 1 || x.dim() > 7) return std::nullopt;
  if (axis != -1 && axis != x.dim() - 1) return std::nullopt;
  if (block_size != opk::kMxBlock || dst_type_max != 0.0 || max_low_bound != 0.0)
    return std::nullopt;
  const auto form = mx_form(dst_type, round_mode, scale_alg.value_or(0));
  if (form.has_value() && opk::mx_fp4(form->dst) && x.size(-1) % 2 != 0) return std::nullopt;
  return form;
}

std::tuple<Tensor, Tensor> npu_dynamic_mx_quant(const Tensor& input, int64_t axis,
                                                c10::string_view round_mode, int64_t dst_type,
                                                int64_t block_size,
                                                std::optional<int64_t> scale_alg,
                                                double dst_type_max, double max_low_bound) {
  const auto form = fast_form(input, axis, round_mode, dst_type, block_size, scale_alg,
                              dst_type_max, max_low_bound);
  if (!form.has_value()) {  // off the hot form (or a broken rule): the reference
    static const auto reference =
        reference_op<decltype(npu_dynamic_mx_quant)>("npu_dynamic_mx_quant");
    return reference.call(input, axis, round_mode, dst_type, block_size, scale_alg,
                          dst_type_max, max_low_bound);
  }
  const opk::MxForm f = *form;
  const Tensor x = input.contiguous();
  const int64_t n = x.size(-1), rows = leading_numel(x, 1);
  auto [yl, scale] = mx_outputs(input, f.dst);
  if (x.numel() == 0) return {yl.finish(), scale};
  uint8_t* yp = reinterpret_cast<uint8_t*>(yl.work.data_ptr());
  uint8_t* sp = scale.data_ptr<uint8_t>();
  const int64_t y_row = opk::mx_y_row(f.dst, n), s_row = opk::mx_scale_row(n);
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = ptr<T>(x);
    parallel_rows(rows, n, [&](int64_t b, int64_t e) {
      opk::mx_quant_rows<T>(xp + b * n, yp + b * y_row, sp + b * s_row, e - b, n, f);
    });
  });
  return {yl.finish(), scale};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_dynamic_mx_quant, &npu_dynamic_mx_quant, kNotDifferentiable);

}  // namespace opsdk
