// CPU launcher of npu_swiglu_quant over the row kernel of kernels/swiglu.h: the forms without
// MoE groups (dynamic or static, int8, smooth_scales absent / (1, N) / (1,)); calls with
// group_index, and invalid calls, go to the reference (op_sdk_reference::npu_swiglu_quant),
// which holds the contract's rules and messages (op_sdk/ops/swiglu_quant.py). `fast_form`
// states which calls the kernel takes; each condition is one of those rules.
#include <torch/library.h>

#include <vector>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "swiglu.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kMaxLastDim = 8192;

bool fast_form(const Tensor& x, const std::optional<Tensor>& smooth,
               const std::optional<Tensor>& offsets, const std::optional<Tensor>& group_index,
               int64_t quant_mode, int64_t group_list_type,
               std::optional<at::ScalarType> dst_type) {
  if (!is_float_dtype(x.scalar_type()) || x.dim() < 2) return false;
  const int64_t d = x.size(-1), n = d / 2;
  if (d <= 0 || d % 2 != 0 || d > kMaxLastDim) return false;
  if ((quant_mode != 0 && quant_mode != 1) || (group_list_type != 0 && group_list_type != 1))
    return false;
  if (dst_type.has_value() && *dst_type != at::kChar) return false;
  if (group_index.has_value()) return false;  // MoE groups: the reference
  auto scale_shaped = [&](const Tensor& s) {
    return s.scalar_type() == at::kFloat &&
           ((s.dim() == 2 && s.size(0) == 1 && s.size(1) == n) || (s.dim() == 1 && s.size(0) == 1));
  };
  if (!smooth.has_value()) return quant_mode == 1;
  if (!scale_shaped(*smooth)) return false;
  if (quant_mode == 0 && offsets.has_value())
    return offsets->scalar_type() == at::kFloat && offsets->sizes() == smooth->sizes();
  return true;
}

std::tuple<Tensor, Tensor> npu_swiglu_quant(const Tensor& x,
                                            const std::optional<Tensor>& smooth_scales,
                                            const std::optional<Tensor>& offsets,
                                            const std::optional<Tensor>& group_index,
                                            bool activate_left, int64_t quant_mode,
                                            int64_t group_list_type,
                                            std::optional<at::ScalarType> dst_type) {
  if (!fast_form(x, smooth_scales, offsets, group_index, quant_mode, group_list_type,
                 dst_type)) {
    static const auto reference = reference_op<decltype(npu_swiglu_quant)>("npu_swiglu_quant");
    return reference.call(x, smooth_scales, offsets, group_index, activate_left, quant_mode,
                          group_list_type, dst_type);
  }
  const int64_t n = x.size(-1) / 2;
  std::vector<int64_t> y_shape(x.sizes().begin(), x.sizes().end());
  y_shape.back() = n;
  Tensor y = new_output(y_shape, x.options().dtype(at::kChar));  // contiguous: torch_npu's Meta
  Tensor scale = new_output(x.sizes().slice(0, x.dim() - 1), x.options().dtype(at::kFloat));
  const int64_t rows = leading_numel(x, 1);
  if (rows == 0) return {y, scale};
  const Tensor xc = x.contiguous();
  const bool dynamic = quant_mode == 1;
  const std::optional<Tensor> s = contiguous_or_none(smooth_scales);
  const std::optional<Tensor> o = dynamic ? std::nullopt : contiguous_or_none(offsets);
  const bool per_channel = s.has_value() && s->numel() == n && s->dim() == 2;
  dispatch_float(xc.scalar_type(), [&](auto tx) {
    using T = decltype(tx);
    parallel_rows(rows, 2 * n, [&](int64_t b, int64_t e) {
      opk::swiglu_quant_rows<T>(ptr<T>(xc) + b * 2 * n, e - b, n, activate_left,
                                ptr_or_null<float>(s), per_channel, ptr_or_null<float>(o),
                                dynamic, ptr<int8_t>(y) + b * n, ptr<float>(scale) + b);
    });
  });
  return {y, scale};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_swiglu_quant, &npu_swiglu_quant, kNotDifferentiable);

}  // namespace opsdk
