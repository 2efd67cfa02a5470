// CPU launcher of npu_dequant_swiglu_quant over the row kernel of kernels/swiglu.h: every form
// without MoE groups (int32 x with its scales and bias, float16 / bfloat16 x, the three
// SwiGLU modes, dynamic or static int8). Calls with group_index, and invalid calls, go to the
// reference (op_sdk_reference::npu_dequant_swiglu_quant), which holds the contract's rules
// and messages (op_sdk/ops/dequant_swiglu_quant.py); `fast_form` states which calls the
// kernel takes, each condition one of those rules, and raises nothing.
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "swiglu.h"

namespace opsdk {
namespace {

using at::Tensor;
using OptT = std::optional<Tensor>;

constexpr int64_t kMaxDims = 8;

bool is_float_param(const Tensor& t) { return is_float_dtype(t.scalar_type()); }

// a (2H,) / (1, 2H) or (H,) / (1, H) parameter of one group, `width` values
bool one_group_row(const Tensor& t, int64_t width) {
  return (t.dim() == 1 && t.size(0) == width) ||
         (t.dim() == 2 && t.size(0) == 1 && t.size(1) == width);
}

bool fast_form(const Tensor& x, const OptT& ws, const OptT& act, const OptT& bias, const OptT& qs,
               const OptT& qo, const OptT& group_index, int64_t quant_mode,
               std::optional<int64_t> dst_type, std::optional<int64_t> round_mode,
               std::optional<int64_t> activate_dim, int64_t swiglu_mode, double clamp_limit,
               double glu_alpha, double glu_bias) {
  const auto st = x.scalar_type();
  if (st != at::kInt && st != at::kHalf && st != at::kBFloat16) return false;
  if (x.dim() < 2 || x.dim() > kMaxDims) return false;
  const int64_t d = x.size(-1), h = d / 2;
  if (d <= 0 || d % 2 != 0) return false;
  if ((quant_mode != 0 && quant_mode != 1) || swiglu_mode < 0 || swiglu_mode > 2) return false;
  if (!std::isfinite(clamp_limit) || !(clamp_limit > 0) || !std::isfinite(glu_alpha) ||
      !std::isfinite(glu_bias))
    return false;
  if (dst_type.has_value() && *dst_type != 1) return false;
  if (round_mode.has_value() && *round_mode != 0) return false;
  if (activate_dim.has_value() && *activate_dim != -1 && *activate_dim != x.dim() - 1)
    return false;
  if (group_index.has_value()) return false;  // MoE groups: the reference
  if (st == at::kInt) {
    if (!ws.has_value() || ws->scalar_type() != at::kFloat || !one_group_row(*ws, d)) return false;
    if (act.has_value()) {
      const int64_t rows = leading_numel(x, 1);
      std::vector<int64_t> lead(x.sizes().begin(), x.sizes().end() - 1), lead1 = lead;
      lead1.push_back(1);
      const auto s = act->sizes();
      const bool shaped = s == at::IntArrayRef(lead) || s == at::IntArrayRef(lead1) ||
                          s == at::IntArrayRef({rows}) || s == at::IntArrayRef({rows, 1});
      if (act->scalar_type() != at::kFloat || !shaped) return false;
    }
    if (bias.has_value() && !((bias->scalar_type() == at::kInt || is_float_param(*bias)) &&
                              one_group_row(*bias, d)))
      return false;
  } else if (ws.has_value() || act.has_value() || bias.has_value()) {
    return false;
  }
  // static mode's forms of quant_scale / quant_offset with one group: (1, H) or (1,)
  auto static_form = [&](const Tensor& t) {
    return (t.dim() == 2 && t.size(0) == 1 && t.size(1) == h) || (t.dim() == 1 && t.size(0) == 1);
  };
  if (qs.has_value()) {
    if (quant_mode == 1 && !(is_float_param(*qs) && one_group_row(*qs, h))) return false;
    if (quant_mode == 0 && !(qs->scalar_type() == at::kFloat && static_form(*qs))) return false;
  }
  if (qo.has_value() && quant_mode == 0) {
    if (!is_float_param(*qo)) return false;
    if (qs.has_value() ? qo->sizes() != qs->sizes() : !static_form(*qo)) return false;
  }
  return true;
}

// a parameter as contiguous float32 (converted once per call), or none
OptT float32_or_none(const OptT& t) {
  if (!t.has_value()) return std::nullopt;
  return t->to(at::kFloat).contiguous();
}

std::tuple<Tensor, Tensor> npu_dequant_swiglu_quant(
    const Tensor& x, const OptT& weight_scale, const OptT& activation_scale, const OptT& bias,
    const OptT& quant_scale, const OptT& quant_offset, const OptT& group_index,
    bool activate_left, int64_t quant_mode, std::optional<int64_t> dst_type,
    std::optional<int64_t> round_mode, std::optional<int64_t> activate_dim, int64_t swiglu_mode,
    double clamp_limit, double glu_alpha, double glu_bias) {
  if (!fast_form(x, weight_scale, activation_scale, bias, quant_scale, quant_offset, group_index,
                 quant_mode, dst_type, round_mode, activate_dim, swiglu_mode, clamp_limit,
                 glu_alpha, glu_bias)) {
    static const auto reference =
        reference_op<decltype(npu_dequant_swiglu_quant)>("npu_dequant_swiglu_quant");
    return reference.call(x, weight_scale, activation_scale, bias, quant_scale, quant_offset,
                          group_index, activate_left, quant_mode, dst_type, round_mode,
                          activate_dim, swiglu_mode, clamp_limit, glu_alpha, glu_bias);
  }
  const int64_t n = x.size(-1) / 2;
  std::vector<int64_t> y_shape(x.sizes().begin(), x.sizes().end());
  y_shape.back() = n;
  Tensor y = new_output(y_shape, x.options().dtype(at::kChar));  // contiguous: torch_npu's Meta
  Tensor scale = new_output(x.sizes().slice(0, x.dim() - 1), x.options().dtype(at::kFloat));
  const int64_t rows = leading_numel(x, 1);
  if (rows == 0) return {y, scale};
  const bool dynamic = quant_mode == 1;
  const Tensor xc = x.contiguous();
  const OptT ws = contiguous_or_none(weight_scale), act = contiguous_or_none(activation_scale);
  const bool int_bias = bias.has_value() && bias->scalar_type() == at::kInt;
  const OptT bias_i = int_bias ? contiguous_or_none(bias) : std::nullopt;
  const OptT bias_f = int_bias ? std::nullopt : float32_or_none(bias);
  const OptT qs = float32_or_none(quant_scale);
  const OptT qo = dynamic ? std::nullopt : float32_or_none(quant_offset);
  opk::DequantSwigluQuantParams p;
  p.weight_scale = ptr_or_null<float>(ws);
  p.bias_int = ptr_or_null<int32_t>(bias_i);
  p.bias_float = ptr_or_null<float>(bias_f);
  p.mode = static_cast<int>(swiglu_mode);
  p.left = activate_left;
  p.alpha = static_cast<float>(glu_alpha);
  p.limit = static_cast<float>(clamp_limit);
  p.glu_bias = static_cast<float>(glu_bias);
  p.quant_scale = ptr_or_null<float>(qs);
  p.quant_scale_per_channel = qs.has_value() && qs->numel() == n && (dynamic || qs->dim() == 2);
  p.quant_offset = ptr_or_null<float>(qo);
  p.quant_offset_per_channel = qo.has_value() && qo->dim() == 2;
  p.dynamic = dynamic;
  const float* pact = ptr_or_null<float>(act);
  auto run = [&](auto tx) {
    using T = decltype(tx);
    parallel_rows(rows, 2 * n, [&](int64_t b, int64_t e) {
      opk::DequantSwigluQuantParams pr = p;
      pr.act_scale = pact != nullptr ? pact + b : nullptr;
      opk::dequant_swiglu_quant_rows<T>(ptr<T>(xc) + b * 2 * n, e - b, n, pr,
                                        ptr<int8_t>(y) + b * n, ptr<float>(scale) + b);
    });
  };
  if (xc.scalar_type() == at::kInt) run(int32_t{});
  else dispatch_float(xc.scalar_type(), run);
  return {y, scale};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_dequant_swiglu_quant, &npu_dequant_swiglu_quant, kNotDifferentiable);

}  // namespace opsdk
