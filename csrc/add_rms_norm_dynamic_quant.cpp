// CPU launcher of npu_add_rms_norm_dynamic_quant: the contract's checks (the same rules and
// words as op_sdk/ops/add_rms_norm_dynamic_quant.py), layout, dtype dispatch and threading
// around the row kernel of kernels/norm_quant.h (int8 outputs); int4 (quint4x2) and float8 /
// HiFloat8 outputs are routed to the reference, their one implementation.
#include <torch/library.h>

#include <array>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "norm_quant.h"
#include "float8_codes.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kInt8 = 1, kQInt8 = 12, kQUInt4x2 = 16, kNpuInt4 = 285;

// Which of the two quantisation branches run (the output_mask rules); `code` gets y_dtype.
std::array<bool, 2> check_add_rms_norm_dynamic_quant(
    const Tensor& x1, const Tensor& x2, const Tensor& gamma,
    const std::optional<Tensor>& smooth_scale1, const std::optional<Tensor>& smooth_scale2,
    const std::optional<Tensor>& beta, std::optional<std::array<bool, 2>> output_mask,
    std::optional<int64_t> y_dtype, int64_t& code) {
  const char* op = "npu_add_rms_norm_dynamic_quant";
  check_add_rms_norm(op, x1, x2, gamma, /*half_only=*/true, /*min_dims=*/2);
  const int64_t h = x1.size(-1);
  check_1d(gamma, op, "gamma", h);
  const std::array<std::pair<const char*, const std::optional<Tensor>*>, 3> opt = {{
      {"smooth_scale1", &smooth_scale1}, {"smooth_scale2", &smooth_scale2}, {"beta", &beta}}};
  for (const auto& [name, t] : opt) {
    if (!t->has_value()) continue;
    check_1d(**t, op, name, h);
    OPK_CHECK((*t)->scalar_type() == x1.scalar_type(), op, name, "must have the dtype of 'x1' (",
              dtype_name(x1.scalar_type()), "), got ", dtype_name((*t)->scalar_type()));
  }
  code = dtype_arg(op, "y_dtype", y_dtype,
                   {kInt8, kQInt8, kQUInt4x2, kNpuInt4, kFloat8E5m2, kFloat8E4m3fn, kHiFloat8, kNpuE5m2,
                    kNpuE4m3fn},
                   kInt8);
  if (code == kNpuInt4) code = kQUInt4x2;  // torch_npu.int4: the same int32-packed output
  if (code == kQUInt4x2)
    OPK_CHECK(h % 8 == 0, op, "x1", "last dim must be a multiple of 8 for int4 (quint4x2) output, got ",
              h);
  if (!output_mask.has_value()) {
    OPK_CHECK(!smooth_scale2.has_value() || smooth_scale1.has_value(), op, "smooth_scale2",
              "requires smooth_scale1 when output_mask is not given");
    return {true, smooth_scale1.has_value() && smooth_scale2.has_value()};
  }
  const std::array<bool, 2> mask = *output_mask;
  OPK_CHECK(mask[0] || mask[1], op, "output_mask",
            "must select at least one output, got [False, False]");
  OPK_CHECK(!smooth_scale1.has_value() || mask[0], op, "smooth_scale1",
            "requires output_mask[0] = True");
  OPK_CHECK(!smooth_scale2.has_value() || mask[1], op, "smooth_scale2",
            "requires output_mask[1] = True");
  return mask;
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> npu_add_rms_norm_dynamic_quant(
    const Tensor& x1, const Tensor& x2, const Tensor& gamma,
    const std::optional<Tensor>& smooth_scale1, const std::optional<Tensor>& smooth_scale2,
    const std::optional<Tensor>& beta, double epsilon,
    std::optional<std::array<bool, 2>> output_mask, std::optional<int64_t> y_dtype) {
  int64_t code = kInt8;
  const std::array<bool, 2> run = check_add_rms_norm_dynamic_quant(
      x1, x2, gamma, smooth_scale1, smooth_scale2, beta, output_mask, y_dtype, code);
  if (code != kInt8 && code != kQInt8) {  // int4 / float8 / HiFloat8: the reference, their one implementation
    static const auto reference = reference_op<decltype(npu_add_rms_norm_dynamic_quant)>(
        "npu_add_rms_norm_dynamic_quant");
    return reference.call(x1, x2, gamma, smooth_scale1, smooth_scale2, beta, epsilon, output_mask,
                          y_dtype);
  }
  const Tensor a = x1.contiguous(), b = x2.contiguous(), g = gamma.contiguous();
  const int64_t n = a.size(-1), rows = leading_numel(a, 1);
  // contiguous whatever x1's layout, as torch_npu's Meta allocates them
  LikeOutput xo = contiguous_output(x1, x1.scalar_type());
  // a branch that does not run returns empty (0,) tensors (the contract's choice)
  std::vector<int64_t> s_shape(a.sizes().begin(), a.sizes().end() - 1);
  std::array<LikeOutput, 2> ys;
  std::array<Tensor, 2> scales;
  for (int i = 0; i < 2; ++i) {
    if (run[i]) {
      ys[i] = contiguous_output(x1, at::kChar);
      scales[i] = at::empty(s_shape, a.options().dtype(at::kFloat));
    } else {
      Tensor e = at::empty({0}, a.options().dtype(at::kChar));
      ys[i] = {e, e};
      scales[i] = at::empty({0}, a.options().dtype(at::kFloat));
    }
  }
  if (rows > 0 && n > 0) {
    const auto sm1 = contiguous_or_none(smooth_scale1), sm2 = contiguous_or_none(smooth_scale2),
               bt = contiguous_or_none(beta);
    dispatch_float(a.scalar_type(), [&](auto tx) {
      using T = decltype(tx);
      opk::AddRmsNormDynamicQuantParams<T> p{
          ptr<T>(a), ptr<T>(b), ptr<T>(g), ptr_or_null<T>(bt), ptr_or_null<T>(sm1),
          ptr_or_null<T>(sm2),
          run[0] ? ptr<int8_t>(ys[0].work) : nullptr, run[1] ? ptr<int8_t>(ys[1].work) : nullptr,
          run[0] ? ptr<float>(scales[0]) : nullptr, run[1] ? ptr<float>(scales[1]) : nullptr,
          ptr<T>(xo.work), n, float(epsilon), /*stream=*/false};
      p.stream = stream_friendly(xo.work, n) &&
                 (!run[0] || stream_friendly(ys[0].work, n)) &&
                 (!run[1] || stream_friendly(ys[1].work, n));
      parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
        opk::add_rms_norm_dynamic_quant_rows<T>(p, r0, r1);
      });
    });
  } else {
    for (int i = 0; i < 2; ++i)
      if (run[i] && scales[i].numel() > 0) scales[i].zero_();  // H == 0: nothing to scale
  }
  return {ys[0].finish(), ys[1].finish(), xo.finish(), scales[0], scales[1]};
}

}  // namespace

// Registered boxed: the dispatcher would turn an output_mask of the wrong length into an
// error that names neither the operator nor the argument, before the kernel runs. (A
// boxed kernel also carries no C++ signature to disagree with torch_npu's
// std::optional<std::array<bool, 2>>.)
void npu_add_rms_norm_dynamic_quant_boxed(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                                          torch::jit::Stack* stack) {
  constexpr size_t kArgs = 9, kOutputMask = 7;
  const c10::IValue& mask = torch::jit::peek(*stack, kOutputMask, kArgs);
  if (mask.isBoolList())
    OPK_CHECK(mask.toBoolList().size() == 2, "npu_add_rms_norm_dynamic_quant", "output_mask",
              "must have 2 values, got ", mask.toBoolList().size());
  static const c10::KernelFunction kernel =
      c10::KernelFunction::makeFromUnboxedFunction(TORCH_FN(npu_add_rms_norm_dynamic_quant));
  kernel.callBoxed(op, ks, stack);
}

OPSDK_NATIVE_OP(npu, npu_add_rms_norm_dynamic_quant,
                torch::CppFunction::makeFromBoxedFunction<&npu_add_rms_norm_dynamic_quant_boxed>(),
                kNotDifferentiable);

}  // namespace opsdk
