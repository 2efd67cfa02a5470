// CPU launcher of npu_add_rms_norm_quant: the contract's checks (the same rules and words
// as op_sdk/ops/add_rms_norm_quant.py), layout, dtype dispatch and threading around the
// row kernel of kernels/norm_quant.h (int8 outputs); float8 / hifloat8 outputs are routed to
// the reference, their one implementation.
#include <torch/library.h>

#include <array>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "float8_codes.h"
#include "norm_quant.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kInt8 = 1, kQInt8 = 12;

// The dtype table of Ascend 950 (op_sdk/ops/add_rms_norm_quant.py ARQ_DTYPES): x -> allowed
// (scales, zero points) pairs.
struct ArqRow {
  c10::ScalarType x, s, zp;
};
constexpr ArqRow kArqRows[] = {
    {at::kHalf, at::kFloat, at::kInt},         {at::kHalf, at::kHalf, at::kHalf},
    {at::kHalf, at::kFloat, at::kFloat},       {at::kBFloat16, at::kFloat, at::kInt},
    {at::kBFloat16, at::kBFloat16, at::kBFloat16}, {at::kBFloat16, at::kFloat, at::kFloat},
    {at::kFloat, at::kFloat, at::kFloat},
};

std::string arq_table(c10::ScalarType x) {
  std::string out;
  for (const ArqRow& r : kArqRows) {
    if (r.x != x) continue;
    out += (out.empty() ? "" : "; ") + dtype_name(r.s).substr(6) + " scales with " +
           dtype_name(r.zp).substr(6) + " zero points";
  }
  return out;
}

bool arq_allowed(c10::ScalarType x, c10::ScalarType s, std::optional<c10::ScalarType> zp) {
  for (const ArqRow& r : kArqRows)
    if (r.x == x && r.s == s && (!zp.has_value() || *zp == r.zp)) return true;
  return false;
}

// Returns the dst_type code.
int64_t check_add_rms_norm_quant(const Tensor& x1, const Tensor& x2, const Tensor& gamma,
                                 const Tensor& scales1, const std::optional<Tensor>& zero_points1,
                                 const std::optional<Tensor>& beta,
                                 const std::optional<Tensor>& scales2,
                                 const std::optional<Tensor>& zero_points2, int64_t axis,
                                 std::optional<int64_t> dst_type) {
  const char* op = "npu_add_rms_norm_quant";
  check_add_rms_norm(op, x1, x2, gamma, /*half_only=*/false);
  OPK_CHECK(axis == -1, op, "axis", "must be -1, got ", axis);
  const int64_t code = dtype_arg(op, "dst_type", dst_type,
                                 {kInt8, kQInt8, kFloat8E5m2, kFloat8E4m3fn, kHiFloat8, kNpuE5m2,
                                  kNpuE4m3fn},
                                 kInt8);
  const std::array<std::pair<const char*, const Tensor*>, 4> args = {{
      {"scales1", &scales1},
      {"zero_points1", zero_points1.has_value() ? &*zero_points1 : nullptr},
      {"scales2", scales2.has_value() ? &*scales2 : nullptr},
      {"zero_points2", zero_points2.has_value() ? &*zero_points2 : nullptr},
  }};
  for (const auto& [name, t] : args)
    if (t != nullptr)
      OPK_CHECK(t->sizes() == gamma.sizes(), op, name, "must have gamma's shape ",
                shape_str(gamma.sizes()), ", got ", shape_str(t->sizes()));
  const auto x = x1.scalar_type(), s = scales1.scalar_type();
  OPK_CHECK(arq_allowed(x, s, std::nullopt), op, "scales1", "must have a dtype ", dtype_name(x),
            " x1 takes (", arq_table(x), "), got ", dtype_name(s));
  if (zero_points1.has_value())
    OPK_CHECK(arq_allowed(x, s, zero_points1->scalar_type()), op, "zero_points1",
              "must have a dtype ", dtype_name(x), " x1 takes (", arq_table(x), "), got ",
              dtype_name(s), " scales with ", dtype_name(zero_points1->scalar_type()),
              " zero points");
  if (scales2.has_value())
    OPK_CHECK(scales2->scalar_type() == s, op, "scales2", "must have scales1's dtype ",
              dtype_name(s), ", got ", dtype_name(scales2->scalar_type()));
  if (zero_points2.has_value()) {
    OPK_CHECK(scales2.has_value(), op, "zero_points2", "requires scales2");
    const auto z2 = zero_points2->scalar_type();
    OPK_CHECK(arq_allowed(x, s, z2) && (!zero_points1.has_value() ||
                                        zero_points1->scalar_type() == z2),
              op, "zero_points2", "must have zero_points1's dtype and one ", dtype_name(x),
              " x1 takes (", arq_table(x), "), got ", dtype_name(z2));
  }
  if (beta.has_value())
    OPK_CHECK(beta->sizes() == gamma.sizes() && beta->scalar_type() == gamma.scalar_type(), op,
              "beta", "must have gamma's shape and dtype (", shape_str(gamma.sizes()), ", ",
              dtype_name(gamma.scalar_type()), "), got (", shape_str(beta->sizes()), ", ",
              dtype_name(beta->scalar_type()), ")");
  return code;
}

std::optional<Tensor> fp32_or_none(const std::optional<Tensor>& t) {
  return t.has_value() ? std::optional<Tensor>(t->to(at::kFloat).contiguous()) : std::nullopt;
}

std::tuple<Tensor, Tensor, Tensor> npu_add_rms_norm_quant(
    const Tensor& x1, const Tensor& x2, const Tensor& gamma, const Tensor& scales1,
    const std::optional<Tensor>& zero_points1, const std::optional<Tensor>& beta,
    const std::optional<Tensor>& scales2, const std::optional<Tensor>& zero_points2,
    int64_t axis, double epsilon, bool div_mode, std::optional<int64_t> dst_type) {
  const int64_t code = check_add_rms_norm_quant(x1, x2, gamma, scales1, zero_points1, beta,
                                                scales2, zero_points2, axis, dst_type);
  if (code != kInt8 && code != kQInt8) {  // float8 / hifloat8: the reference, their one implementation
    static const auto reference =
        reference_op<decltype(npu_add_rms_norm_quant)>("npu_add_rms_norm_quant");
    return reference.call(x1, x2, gamma, scales1, zero_points1, beta, scales2, zero_points2, axis,
                          epsilon, div_mode, dst_type);
  }
  const Tensor a = x1.contiguous(), b = x2.contiguous(), g = gamma.contiguous();
  const int64_t n = g.numel(), rows = leading_numel(a, g.dim());
  // contiguous whatever x1's layout, as torch_npu's Meta allocates them
  LikeOutput y1 = contiguous_output(x1, at::kChar), xo = contiguous_output(x1, x1.scalar_type());
  // y2 is all zeros without scales2 (the contract's choice)
  LikeOutput y2;
  const bool y2_zeros = !scales2.has_value();
  if (y2_zeros) {
    Tensor z = zeros_output(x1.sizes(), x1.options().dtype(at::kChar));
    y2 = {z, z};
  } else {
    y2 = contiguous_output(x1, at::kChar);
  }
  if (rows > 0 && n > 0) {
    // the scale / zero-point vectors are small: up-cast them to fp32 once
    const Tensor s1 = scales1.to(at::kFloat).contiguous();
    const auto zp1 = fp32_or_none(zero_points1), s2 = fp32_or_none(scales2),
               zp2 = fp32_or_none(zero_points2), bt = contiguous_or_none(beta);
    dispatch_float(a.scalar_type(), [&](auto tx) {
      using T = decltype(tx);
      opk::AddRmsNormQuantParams<T> p{ptr<T>(a), ptr<T>(b), ptr<T>(g), ptr_or_null<T>(bt),
                                      ptr<float>(s1), ptr_or_null<float>(zp1),
                                      ptr_or_null<float>(s2), ptr_or_null<float>(zp2),
                                      ptr<int8_t>(y1.work), ptr<int8_t>(y2.work),
                                      ptr<T>(xo.work), n, float(epsilon), div_mode,
                                      /*stream=*/false, y2_zeros};
      p.stream = stream_friendly(xo.work, n) && stream_friendly(y1.work, n) &&
                 (y2_zeros || stream_friendly(y2.work, n));
      parallel_rows(rows, n, [&](int64_t r0, int64_t r1) {
        opk::add_rms_norm_quant_rows<T>(p, r0, r1);
      });
    });
  } else if (!y2_zeros && y2.work.numel() > 0) {
    y2.work.zero_();
  }
  return {y1.finish(), y2.finish(), xo.finish()};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_add_rms_norm_quant, &npu_add_rms_norm_quant, kNotDifferentiable);

}  // namespace opsdk
