// CPU launcher of npu_quant_matmul (the contract's subset): the checks of
// op_sdk/ops/_quant_matmul_*.py in the same words, then per (broadcast) batch an exact int32
// product and the dequantisation epilogue fused into one pass over the output
// (quant_matmul_impl of csrc/quant_matmul_launch.h). int4 weights (A4W4, per-group A4W4
// and A8W4) are unpacked to int8 here first; the per-group forms take the exact product one
// group of 256 rows of k at a time and sum the scaled groups in fp32, in order.
//
// The product, when x2 is the transpose of an (n, k) row-major weight (how models keep
// int8 weights) and x1 has few rows (decode): up to OP_SDK_QMM_VNNI_MAX_M rows (default
// 3) the AVX-512 VNNI kernel of kernels/quant_matmul.h, up to OP_SDK_QMM_AMX_MAX_M
// (default 32, at most 64) the AMX kernel of kernels/quant_matmul_amx.h; both read the
// weight in place, once. Otherwise, or without those instructions, ATen's int8 GEMM
// (at::_int_mm). A limit of 0 turns that kernel off. quant_matmul_packed (op_sdk's own,
// csrc/quant_matmul_packed.cpp) runs the same operator on a prepacked weight (see
// int8_product).
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "checks.h"
#include "launch.h"
#include "quant_matmul_launch.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr const char* kOp = "npu_quant_matmul";

// ---- int4 weights (op_sdk/ops/_quant_matmul_int4.py: A4W4, A8W4) -------------------

constexpr int64_t kA8W4Group = 256;

// int32-packed int4 (8 per int32, element 0 in the lowest nibble) -> int8 (..., 8 * last).
Tensor unpack_int4(const Tensor& packed) {
  const Tensor src = packed.contiguous();
  std::vector<int64_t> shape(src.sizes().begin(), src.sizes().end());
  shape.back() *= 8;
  Tensor out = at::empty(shape, src.options().dtype(at::kChar));
  const uint32_t* in = reinterpret_cast<const uint32_t*>(src.data_ptr<int32_t>());
  int8_t* o = ptr<int8_t>(out);
  at::parallel_for(0, src.numel(), 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int j = 0; j < 8; ++j) {
        const int v = int((in[i] >> (4 * j)) & 0xF);
        o[i * 8 + j] = int8_t(v >= 8 ? v - 16 : v);
      }
  });
  return out;
}

// A4W4: (k, n, x2 is the transposed "continuous" layout), the rules of _a4w4_shapes.
std::tuple<int64_t, int64_t, bool> a4w4_shapes(const Tensor& x1, const Tensor& x2) {
  OPK_CHECK(x1.dim() >= 2, kOp, "x1", "must have at least 2 dims (m, k/8), got ", x1.dim());
  OPK_CHECK(x2.dim() == 2, kOp, "x2", "must be 2-D for int4 (int32-packed) weights, got ",
            x2.dim(), " dims");
  const int64_t k = x1.size(-1) * 8;
  if (x2.size(0) == x1.size(-1)) return {k, x2.size(1), true};
  OPK_CHECK(x2.size(0) == k, kOp, "x2", "must be (k, n/8) = (", k, ", n/8) packed along n, or "
            "the transpose of an (n, k/8) = (n, ", k / 8, ") tensor packed along k, got ",
            shape_str(x2.sizes()));
  return {k, x2.size(1) * 8, false};
}

// The per-group forms (A8W4, per-group A4W4): for each group of `group` rows of k (the last
// one shorter when `group` does not divide k), the exact int32 product of a's and b's slices,
// then out[r, j] += term(r, j, product[r, j]), the groups summed in fp32 in order.
// `prepare(g, a's group slice (contiguous), k0, len)` returns that group's term.
template <typename Prepare>
Tensor sum_group_products(const Tensor& a, const Tensor& b, int64_t group, Prepare&& prepare) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  Tensor out = at::zeros({m, n}, a.options().dtype(at::kFloat));
  Tensor acc = at::empty({m, n}, a.options().dtype(at::kInt));
  float* op_ = out.data_ptr<float>();
  const int32_t* ap = acc.data_ptr<int32_t>();
  for (int64_t g = 0, k0 = 0; k0 < k; ++g, k0 += group) {
    const int64_t len = std::min(group, k - k0);
    const Tensor ag = a.narrow(1, k0, len).contiguous();
    int8_product(ag, b.narrow(0, k0, len), acc, nullptr);
    const auto term = prepare(g, ag, k0, len);
    parallel_rows(m, n, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t j = 0; j < n; ++j) op_[r * n + j] = op_[r * n + j] + term(r, j, ap[r * n + j]);
    });
  }
  return out;
}

Tensor a8w4_matmul(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                   const std::optional<Tensor>& offset, const std::optional<Tensor>& pertoken,
                   const std::optional<Tensor>& bias, std::optional<int64_t> output_dtype,
                   at::OptionalIntArrayRef group_sizes) {
  const char* op = kOp;
  OPK_CHECK(x1.dim() == 2, op, "x1", "must be 2-D (m, k) with int4 weights, got ", x1.dim(),
            " dims");
  OPK_CHECK(x2.dim() == 2, op, "x2", "must be 2-D (k, n/8) int32 (int4 packed), got ", x2.dim(),
            " dims");
  const int64_t m = x1.size(0), k = x1.size(1), n = x2.size(1) * 8;
  OPK_CHECK(x2.size(0) == k, op, "x2", "must have k = ", k, " rows, got ", shape_str(x2.sizes()));
  OPK_CHECK(k % kA8W4Group == 0, op, "x1", "k must be a multiple of ", kA8W4Group,
            " with int4 weights (one scale per ", kA8W4Group, " rows of k), got ", k);
  const int64_t groups = k / kA8W4Group;
  if (group_sizes.has_value())
    OPK_CHECK(group_sizes->size() == 3 && (*group_sizes)[2] == kA8W4Group, op, "group_sizes",
              "must be [0, 0, ", kA8W4Group, "] (or None) with int4 weights, got ",
              c10::IntArrayRef(*group_sizes));
  OPK_CHECK((scale.scalar_type() == at::kLong || scale.scalar_type() == at::kFloat) &&
                scale.dim() == 2 && scale.size(0) == groups && scale.size(1) == n,
            op, "scale", "must be int64 (npu_trans_quant_param's packed value) or float32 of "
            "shape (k/", kA8W4Group, ", n) = (", groups, ", ", n, "), got ",
            dtype_name(scale.scalar_type()), " ", shape_str(scale.sizes()));
  OPK_CHECK(pertoken.has_value(), op, "pertoken_scale", "is required with int4 weights");
  OPK_CHECK(pertoken->scalar_type() == at::kFloat && pertoken->dim() == 2 &&
                pertoken->size(0) == m && pertoken->size(1) == 1,
            op, "pertoken_scale", "must be float32 of shape (m, 1) = (", m,
            ", 1) with int4 weights, got ", dtype_name(pertoken->scalar_type()), " ",
            shape_str(pertoken->sizes()));
  if (offset.has_value())
    OPK_CHECK(offset->scalar_type() == at::kFloat && offset->dim() == 1 && offset->size(0) == n,
              op, "offset", "must be float32 of shape (n,) = (", n, ",), got ",
              dtype_name(offset->scalar_type()), " ", shape_str(offset->sizes()));
  QMM_UNSUPPORTED(!bias.has_value(), "bias",
                  "is not supported with int8 x1 and int4 weights (use offset)");
  const int64_t code = dtype_arg(op, "output_dtype", output_dtype, {kFloat16, kBFloat16}, -1);
  const Tensor w = unpack_int4(x2);
  const Tensor s = unpack_quant_scale(scale).contiguous();
  Tensor out = sum_group_products(
      x1, w, kA8W4Group, [&](int64_t g, const Tensor&, int64_t k0, int64_t len) {
        // (x1 - 8) @ w, the NPU's convention (op_sdk/ops/_quant_matmul_int4.py): minus 8 column
        // sums
        Tensor cs = w.narrow(0, k0, len).to(at::kInt).sum(0, false, at::kInt);
        const int32_t* csp = cs.data_ptr<int32_t>();
        const float* sg = s.data_ptr<float>() + g * n;
        return [cs = std::move(cs), csp, sg](int64_t, int64_t j, int32_t p) {
          return float(p - 8 * csp[j]) * sg[j];
        };
      });
  if (offset.has_value()) out = out + *offset;
  out = out * *pertoken;
  return out.to(code == kFloat16 ? at::kHalf : at::kBFloat16);
}

// Per-group A4W4 (op_sdk/ops/_quant_matmul_int4.py: check_a4w4_per_group, the same rules in the
// same words and order): per group of 256 rows of k (the last one shorter when 256 does not
// divide k), the exact value of x1[:, g] @ (x2[g, :] - offset[g]) (the int32 product minus
// the row sums of x1[:, g] times the float16 zero point, exact in fp64) rounded once to
// fp32, times scale[g], summed in fp32 in order; then times pertoken_scale.
constexpr int64_t kA4W4Group = 256;

Tensor a4w4_per_group_matmul(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                             const std::optional<Tensor>& offset,
                             const std::optional<Tensor>& pertoken,
                             const std::optional<Tensor>& bias,
                             std::optional<int64_t> output_dtype,
                             std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
                             std::optional<int64_t> pertoken_scale_dtype,
                             std::optional<int64_t> scale_dtype,
                             at::OptionalIntArrayRef group_sizes,
                             const std::optional<Tensor>& y_scale) {
  const char* op = kOp;
  check_none_outside_subset(op, {{"x1_dtype", x1_dtype.has_value()},
                                 {"x2_dtype", x2_dtype.has_value()},
                                 {"pertoken_scale_dtype", pertoken_scale_dtype.has_value()},
                                 {"scale_dtype", scale_dtype.has_value()},
                                 {"y_scale", y_scale.has_value()}});
  OPK_CHECK(x1.dim() == 2, op, "x1", "must be 2-D (m, k/8) with int4 x1 and x2 and a per-group "
            "(2-D) scale, got ", x1.dim(), " dims");
  const std::tuple<int64_t, int64_t, bool> shapes = a4w4_shapes(x1, x2);
  const int64_t k = std::get<0>(shapes), n = std::get<1>(shapes), m = x1.size(0), g = kA4W4Group;
  const bool transposed = std::get<2>(shapes);
  OPK_CHECK(group_sizes.has_value() && group_sizes->size() == 3 &&
                ((*group_sizes)[0] == 0 || (*group_sizes)[0] == 1) &&
                ((*group_sizes)[1] == 0 || (*group_sizes)[1] == 1) && (*group_sizes)[2] == g,
            op, "group_sizes", "must be [0, 0, ", g, "] or [1, 1, ", g, "] (one scale row per ", g,
            " rows of k) with int4 x1 and x2 and a per-group (2-D) scale, got ",
            group_sizes.has_value() ? c10::str(c10::IntArrayRef(*group_sizes))
                                    : std::string("None"));
  const int64_t groups = (k + g - 1) / g;
  OPK_CHECK(scale.scalar_type() == at::kFloat && scale.size(0) == groups && scale.size(1) == n,
            op, "scale", "must be float32 of shape (ceil(k/", g, "), n) = (", groups, ", ", n,
            ") with int4 x1 and x2 per group, got ", dtype_name(scale.scalar_type()), " ",
            shape_str(scale.sizes()));
  OPK_CHECK(offset.has_value(), op, "offset", "is required with int4 x1 and x2 and a per-group "
            "(2-D) scale (the weight's float16 zero points, shaped like scale)");
  OPK_CHECK(offset->scalar_type() == at::kHalf && offset->dim() == 2 &&
                offset->size(0) == groups && offset->size(1) == n,
            op, "offset", "must be float16 of scale's shape (", groups, ", ", n,
            ") with int4 x1 and x2 per group, got ", dtype_name(offset->scalar_type()), " ",
            shape_str(offset->sizes()));
  OPK_CHECK(pertoken.has_value(), op, "pertoken_scale",
            "is required with int4 x1 and x2 and a per-group (2-D) scale");
  OPK_CHECK(pertoken->scalar_type() == at::kFloat && pertoken->dim() == 2 &&
                pertoken->size(0) == m && pertoken->size(1) == 1,
            op, "pertoken_scale", "must be float32 of shape (m, 1) = (", m,
            ", 1) with int4 x1 and x2 per group, got ", dtype_name(pertoken->scalar_type()), " ",
            shape_str(pertoken->sizes()));
  OPK_CHECK(!bias.has_value(), op, "bias", "must be None with int4 x1 and x2 and a per-group "
            "(2-D) scale, got ", dtype_name(bias->scalar_type()), " ", shape_str(bias->sizes()));
  const int64_t code = dtype_arg(op, "output_dtype", output_dtype, {kFloat16, kBFloat16}, -1);

  const Tensor a = unpack_int4(x1);                                         // (m, k)
  const Tensor b = transposed ? unpack_int4(x2.t()).t() : unpack_int4(x2);  // (k, n)
  const Tensor s = scale.contiguous();
  const Tensor off = offset->to(at::kFloat).contiguous();  // float16 -> float32 is exact
  Tensor out = sum_group_products(
      a, b, g, [&](int64_t gi, const Tensor& ag, int64_t, int64_t len) {
        const int8_t* agp = ag.data_ptr<int8_t>();
        std::vector<int32_t> rowsum(static_cast<size_t>(m));
        for (int64_t r = 0; r < m; ++r) {
          int32_t t = 0;
          for (int64_t c = 0; c < len; ++c) t += agp[r * len + c];
          rowsum[size_t(r)] = t;
        }
        const float* sg = s.data_ptr<float>() + gi * n;
        const float* zg = off.data_ptr<float>() + gi * n;
        return [rowsum = std::move(rowsum), sg, zg](int64_t r, int64_t j, int32_t p) {
          // every term is exact in fp64 (the product of an int32 and a float16 value, and
          // the difference), so this is the exact group value, rounded once to fp32
          const double v = double(p) - double(rowsum[size_t(r)]) * double(zg[j]);
          return float(v) * sg[j];
        };
      });
  out = out * *pertoken;
  return out.to(code == kFloat16 ? at::kHalf : at::kBFloat16);
}

// ---- the forms off the CPU hot path: float8 / HiFloat8 inputs, per-block (G-B / B-B) and MX
// scales (Ascend 950 and DeepSeek-style quantisation). Their rules and formulas live once, in
// the reference (op_sdk/ops/_quant_matmul_float8.py, _quant_matmul_per_block.py,
// _quant_matmul_mx.py); the launcher routes these calls there (call_reference). Which form
// a call is: the tests of op_sdk/ops/quant_matmul.py's quant_matmul_reference, in its order.

constexpr int64_t kHiFloat8In = 290;

bool is_float8(const Tensor& t) {
  return t.scalar_type() == at::kFloat8_e4m3fn || t.scalar_type() == at::kFloat8_e5m2;
}

bool is_reference_form(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                       const std::optional<Tensor>& pertoken, std::optional<int64_t> x1_dtype,
                       std::optional<int64_t> x2_dtype, std::optional<int64_t> pertoken_scale_dtype,
                       std::optional<int64_t> scale_dtype) {
  const bool mx = scale_dtype.has_value() || pertoken_scale_dtype.has_value();
  const bool per_block = x1.scalar_type() != at::kInt && x2.scalar_type() != at::kInt &&
                         scale.dim() >= 2 && pertoken.has_value() && pertoken->dim() >= 2;
  const bool float8 = is_float8(x1) || is_float8(x2) ||
                      (x1_dtype == kHiFloat8In && x2_dtype == kHiFloat8In);
  return mx || per_block || float8;
}

Tensor npu_quant_matmul(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                        const std::optional<Tensor>& offset,
                        const std::optional<Tensor>& pertoken_scale,
                        const std::optional<Tensor>& bias, std::optional<int64_t> output_dtype,
                        std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
                        std::optional<int64_t> pertoken_scale_dtype,
                        std::optional<int64_t> scale_dtype, at::OptionalIntArrayRef group_sizes,
                        const std::optional<Tensor>& y_scale) {
  if (is_reference_form(x1, x2, scale, pertoken_scale, x1_dtype, x2_dtype, pertoken_scale_dtype,
                        scale_dtype)) {
    static const auto reference = reference_op<decltype(npu_quant_matmul)>("npu_quant_matmul");
    return reference.call(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                          x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale);
  }
  const bool a4w4 = x1.scalar_type() == at::kInt && x2.scalar_type() == at::kInt;
  if (a4w4 && scale.dim() == 2)  // a 2-D scale: per-group A4W4
    return a4w4_per_group_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype,
                                 x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype,
                                 group_sizes, y_scale);
  if (x1.scalar_type() == at::kChar && x2.scalar_type() == at::kInt && !x1_dtype.has_value() &&
      !x2_dtype.has_value())
    return a8w4_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, group_sizes);
  Tensor a = x1, b = x2;
  if (a4w4) {
    const bool transposed = std::get<2>(a4w4_shapes(x1, x2));
    const int64_t code = dtype_arg(kOp, "output_dtype", output_dtype,
                                   {kInt8, kInt32, kFloat16, kBFloat16}, kInt8);
    OPK_CHECK(pertoken_scale.has_value() || code == kFloat16, kOp, "output_dtype",
              "must be float16 for int4 x1 and x2 without pertoken_scale, got ",
              dtype_value_str(output_dtype));
    OPK_CHECK(!bias.has_value() || bias->dim() == 1, kOp, "bias",
              "must be 1-D (n,) with int4 x1 and x2, got shape ",
              shape_str(bias.has_value() ? bias->sizes() : at::IntArrayRef()));
    a = unpack_int4(x1);
    b = transposed ? unpack_int4(x2.t()).t() : unpack_int4(x2);  // (k, n), in place if transposed
  }
  const int64_t code = check_quant_matmul(
      kOp, a, b, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype.has_value(),
      x2_dtype.has_value(), pertoken_scale_dtype.has_value(), scale_dtype.has_value(),
      group_sizes.has_value(), y_scale.has_value());
  return quant_matmul_impl(code, a, b, nullptr, scale, offset, pertoken_scale, bias);
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_quant_matmul, &npu_quant_matmul, kNotDifferentiable);

}  // namespace opsdk
