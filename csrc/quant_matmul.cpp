// CPU launcher of npu_quant_matmul (the contract's subset): the checks of
// op_sdk/ops/quant_matmul.py in the same words, then per (broadcast) batch an exact int32
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

// ---- int4 weights (op_sdk/ops/quant_matmul.py: A4W4 and per-group A8W4) --------------------

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
        // (x1 - 8) @ w, the NPU's convention (op_sdk/ops/quant_matmul.py): minus 8 column
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

// Per-group A4W4 (op_sdk/ops/quant_matmul.py: check_a4w4_per_group, the same rules in the
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

// ---- float8 / HiFloat8 inputs (Ascend 950): the float8 forms of op_sdk/ops/quant_matmul.py
// (same checks, same words, same order). x1 / x2 float8_e4m3fn / float8_e5m2, or both
// HiFloat8 bits in 1-byte tensors (x1_dtype = x2_dtype = 290); float16 / bfloat16 / float32
// output; either a float32 scale (1,) / (n,) with an optional float32 pertoken_scale
// (1,) / (m,):
//   out = fp32(x1 @ x2) * scale (* pertoken_scale[:, None])
// or an int64 / uint64 scale (1,) / (n,) (npu_trans_quant_param's packed value, decoded by
// unpack_quant_scale) with an optional float32 bias (n,) / (batch, 1, n), the static T-C /
// T-T form of CANN's aclnnQuantMatmulV5 (sources cited in the Python file):
//   out = (fp32(x1 @ x2) + bias) * scale
// with the exact decoded values multiplied and summed in fp64, rounded once to fp32.
constexpr int64_t kHiFloat8In = 290, kFloat32Out = 6, kE8M0 = 293, kMxGroup = 32,
                  kFloat4E2M1 = 296;

bool is_float8(const Tensor& t) {
  return t.scalar_type() == at::kFloat8_e4m3fn || t.scalar_type() == at::kFloat8_e5m2;
}

// One HiFloat8 code's value (op_sdk/ops/_formats.py, hif8_to_float): 0x80 NaN, 0x6F / 0xEF
// +-inf, 0 / 0x80 aside the sign bit and a prefix-coded "dot" field select the exponent.
double hif8_value(int b) {
  if (b == 128) return std::numeric_limits<double>::quiet_NaN();
  const int v = b & 127;
  const double sign = (b & 128) ? -1.0 : 1.0;
  if (v == 0) return 0.0;
  if (v == 111) return sign * std::numeric_limits<double>::infinity();
  const int dot = v >> 3;
  int e = 0;
  double m = 1.0;
  if (dot >= 12) {
    e = ((v >> 1) & 7) + 8, m = 1.0 + (v & 1) * 0.5;
  } else if (dot >= 8) {
    e = ((v >> 2) & 3) + 4, m = 1.0 + (v & 3) * 0.25;
  } else if (dot >= 4) {
    e = ((v >> 3) & 1) + 2, m = 1.0 + (v & 7) * 0.125;
  } else if (dot >= 2) {
    e = 1, m = 1.0 + (v & 7) * 0.125;
  } else if (dot == 1) {
    e = 0, m = 1.0 + (v & 7) * 0.125;
  } else {
    return sign * std::ldexp(1.0, (v & 7) - 23);
  }
  if (dot >= 2 && (v & (dot >= 4 ? 16 : 8))) e = -e;
  return sign * std::ldexp(m, e);
}

Tensor float8_values(const Tensor& x, bool hif8) {
  if (!hif8) return x.to(at::kDouble);
  static const Tensor lut = [] {
    Tensor t = at::empty({256}, at::kDouble);
    double* p = t.data_ptr<double>();
    for (int i = 0; i < 256; ++i) p[i] = hif8_value(i);
    return t;
  }();
  const Tensor idx = x.contiguous().view(at::kByte).to(at::kLong);
  return lut.index_select(0, idx.reshape({-1})).reshape(x.sizes());
}

// float8_e4m3fn / float8_e5m2 x1 and x2, or both HiFloat8 (1-byte integer tensors).
void check_float8_inputs(const char* op, const Tensor& x1, const Tensor& x2,
                         std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype) {
  const bool hif8 = x1_dtype == kHiFloat8In && x2_dtype == kHiFloat8In;
  const std::tuple<const char*, const char*, const Tensor*, std::optional<int64_t>> inputs[] = {
      {"x1", "x1_dtype", &x1, x1_dtype}, {"x2", "x2_dtype", &x2, x2_dtype}};
  for (const auto& [name, arg, x, code] : inputs) {
    const std::string got = dtype_value_str(code);
    if (hif8) {
      OPK_CHECK(x->element_size() == 1 && !x->is_floating_point(), op, name,
                "must be a 1-byte integer tensor holding HiFloat8 bits (uint8 / int8), got ",
                dtype_name(x->scalar_type()));
    } else {
      QMM_UNSUPPORTED(!code.has_value(), arg, "must be None or torch_npu.hifloat8 (290) (the "
                      "supported subset), got ", got);
      QMM_UNSUPPORTED(is_float8(*x), name, "must be float8_e4m3fn or float8_e5m2 when the other "
                      "input is (the supported subset), got ", dtype_name(x->scalar_type()));
    }
  }
}

// The float output dtype of an output_dtype code (float16, bfloat16 or float32).
c10::ScalarType float_output(int64_t code) {
  return code == kFloat16 ? at::kHalf : code == kBFloat16 ? at::kBFloat16 : at::kFloat;
}

// sum_j fp32(a[..., Kj] @ b[..., Kj, :]) * (xs[..., j] * ws[..., j, :]) + bias, the
// per-block and MX formula (_block_sum of op_sdk/ops/quant_matmul.py, the same steps).
Tensor block_sum(const Tensor& a, const Tensor& b, const Tensor& xs, const Tensor& ws,
                 int64_t gk, const std::vector<int64_t>& batch, const std::optional<Tensor>& bias,
                 int64_t code) {
  const int64_t m = a.size(-2), k = a.size(-1), n = b.size(-1);
  std::vector<int64_t> out_shape =
      at::infer_size(at::infer_size(batch, xs.sizes().slice(0, xs.dim() - 2)),
                     ws.sizes().slice(0, ws.dim() - 2));
  out_shape.push_back(m);
  out_shape.push_back(n);
  Tensor out = at::zeros(out_shape, a.options().dtype(at::kFloat));
  for (int64_t j = 0, kb = (k + gk - 1) / gk; j < kb; ++j) {
    const int64_t k0 = j * gk, len = std::min(k, k0 + gk) - k0;
    const Tensor acc = at::matmul(a.narrow(-1, k0, len), b.narrow(-2, k0, len)).to(at::kFloat);
    out = out + acc * (xs.narrow(-1, j, 1) * ws.narrow(-2, j, 1));
  }
  if (bias.has_value()) out = out + *bias;
  return out.to(float_output(code));
}

// Whether batch dims `lead` broadcast to `batch` (the output's; _broadcasts_to of
// op_sdk/ops/quant_matmul.py).
bool broadcasts_to(at::IntArrayRef lead, const std::vector<int64_t>& batch) {
  bool ok = lead.size() <= batch.size();
  for (size_t i = 0; ok && i < lead.size(); ++i) {
    const int64_t a = lead[lead.size() - 1 - i], b = batch[batch.size() - 1 - i];
    ok = a == 1 || a == b;
  }
  return ok;
}

// {the group_sizes given, [gsM, gsN, gsK]} with None as [0, 0, 0] and each 0 inferred as the
// dim over the scale's dim when it divides, else -1 (_group_sizes of
// op_sdk/ops/quant_matmul.py, the same words).
std::pair<std::vector<int64_t>, std::vector<int64_t>> infer_group_sizes(
    const char* op, at::OptionalIntArrayRef group_sizes, const std::array<int64_t, 3>& dims,
    const std::array<int64_t, 3>& scale_dims) {
  std::vector<int64_t> gs = group_sizes.has_value() ? group_sizes->vec()
                                                    : std::vector<int64_t>{0, 0, 0};
  OPK_CHECK(gs.size() == 3, op, "group_sizes", "must have 3 values [gsM, gsN, gsK], got ",
            shape_str(gs));
  const std::vector<int64_t> given = gs;
  for (int i = 0; i < 3; ++i)
    if (gs[i] == 0)
      gs[i] = scale_dims[i] != 0 && dims[i] % scale_dims[i] == 0 ? dims[i] / scale_dims[i] : -1;
  return {given, gs};
}

// G-B / B-B per-block scales: the rules, the formula and their sources are in
// op_sdk/ops/quant_matmul.py (check_per_block, _per_block_reference); the same ATen steps in
// the same order, so the two agree bit for bit.
bool is_per_block(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                  const std::optional<Tensor>& pertoken) {
  return x1.scalar_type() != at::kInt && x2.scalar_type() != at::kInt && scale.dim() >= 2 &&
         pertoken.has_value() && pertoken->dim() >= 2;
}

Tensor per_block_matmul(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                        const std::optional<Tensor>& offset, const Tensor& pertoken,
                        const std::optional<Tensor>& bias, std::optional<int64_t> output_dtype,
                        std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
                        std::optional<int64_t> pertoken_scale_dtype,
                        std::optional<int64_t> scale_dtype, at::OptionalIntArrayRef group_sizes,
                        const std::optional<Tensor>& y_scale) {
  const char* op = kOp;
  check_none_outside_subset(op, {{"offset", offset.has_value()},
                                 {"pertoken_scale_dtype", pertoken_scale_dtype.has_value()},
                                 {"scale_dtype", scale_dtype.has_value()},
                                 {"y_scale", y_scale.has_value()}});
  const bool int8 = x1.scalar_type() == at::kChar && x2.scalar_type() == at::kChar &&
                    !x1_dtype.has_value() && !x2_dtype.has_value();
  if (!int8) check_float8_inputs(op, x1, x2, x1_dtype, x2_dtype);
  const auto [m, n] = check_matmul_shapes(op, x1, x2);
  const int64_t k = x1.size(-1);
  const std::vector<int64_t> batch =
      at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  OPK_CHECK(pertoken.scalar_type() == at::kFloat, op, "pertoken_scale",
            "must be float32 with per-block scales, got ", dtype_name(pertoken.scalar_type()));
  OPK_CHECK(scale.scalar_type() == at::kFloat, op, "scale",
            "must be float32 with per-block scales, got ", dtype_name(scale.scalar_type()));
  const int64_t sm = pertoken.size(-2), sk = pertoken.size(-1);
  const int64_t sk2 = scale.size(-2), sn = scale.size(-1);
  OPK_CHECK(sk == sk2, op, "pertoken_scale", "must have as many k groups (its last dim) as "
            "scale (its dim -2, ", sk2, "), got shape ", shape_str(pertoken.sizes()));
  const auto [given, gs] = infer_group_sizes(op, group_sizes, {m, n, k}, {sm, sn, sk});
  const bool gb = gs == std::vector<int64_t>{1, 128, 128};
  const bool bb = gs == std::vector<int64_t>{128, 128, 128};
  OPK_CHECK(gb || bb, op, "group_sizes", "must be [1, 128, 128] (G-B) or [128, 128, 128] (B-B) "
            "with per-block scales (a 0 is the dim over the scale's dim), got ",
            shape_str(given), " ([gsM, gsN, gsK] = ", shape_str(gs), ")");
  const int64_t gm = gs[0], gn = gs[1], gk = gs[2];
  OPK_CHECK(!int8 || gm == 1, op, "group_sizes", "must be [1, 128, 128] (G-B) with int8 x1 and "
            "x2 (B-B takes float8 / hifloat8 inputs), got ", shape_str(given));
  const int64_t pt_m = (m + gm - 1) / gm, kb = (k + gk - 1) / gk, s_n = (n + gn - 1) / gn;
  OPK_CHECK(sm == pt_m && sk == kb, op, "pertoken_scale", "must have shape (..., ceil(m / ", gm,
            "), ceil(k / ", gk, ")) = (..., ", pt_m, ", ", kb, "), got ",
            shape_str(pertoken.sizes()));
  OPK_CHECK(sk2 == kb && sn == s_n, op, "scale", "must have shape (..., ceil(k / ", gk,
            "), ceil(n / ", gn, ")) = (..., ", kb, ", ", s_n, "), got ", shape_str(scale.sizes()));
  for (const auto& [name, t] : {std::pair<const char*, const Tensor*>{"pertoken_scale", &pertoken},
                                {"scale", &scale}}) {
    const at::IntArrayRef lead = t->sizes().slice(0, t->dim() - 2);
    OPK_CHECK(broadcasts_to(lead, batch), op, name, "batch dims must broadcast to the output's ", shape_str(batch),
              ", got ", shape_str(lead));
  }
  int64_t code;
  if (int8) {
    if (bias.has_value())
      OPK_CHECK(bias->scalar_type() == at::kFloat && bias->dim() == 1 && bias->size(0) == n, op,
                "bias", "must be float32 of shape (n,) = (", n, ",) with int8 x1 and x2 and "
                "per-block scales, got ", dtype_name(bias->scalar_type()), " ",
                shape_str(bias->sizes()));
    code = dtype_arg(op, "output_dtype", output_dtype, {kBFloat16}, kInt8);
  } else {
    OPK_CHECK(!bias.has_value(), op, "bias",
              "must be None with float8 / hifloat8 inputs and per-block scales");
    code = dtype_arg(op, "output_dtype", output_dtype, {kFloat16, kBFloat16, kFloat32Out}, kInt8);
  }
  const bool hif8 = !int8 && x1_dtype == kHiFloat8In;
  return block_sum(float8_values(x1, hif8), float8_values(x2, hif8),
                   pertoken.repeat_interleave(gm, -2).narrow(-2, 0, m),
                   scale.repeat_interleave(gn, -1).narrow(-1, 0, n), gk, batch, bias, code);
}

// E8M0 codes (a 1-byte tensor) -> float32: 2^(e - 127), NaN for 255 (e8m0_to_float of
// op_sdk/ops/quant_matmul.py).
Tensor e8m0_to_float(const Tensor& codes) {
  const Tensor e = codes.view(at::kByte).to(at::kInt);
  const Tensor v = at::ldexp(at::ones_like(e, e.options().dtype(at::kDouble)),
                             (e - 127).to(at::kDouble))
                       .to(at::kFloat);
  return at::where(e == 255, at::full_like(v, std::numeric_limits<float>::quiet_NaN()), v);
}

// torch_npu's is_transpose_last_two_dims (_is_transposed of op_sdk/ops/quant_matmul.py).
bool is_transposed(const Tensor& t) {
  if (t.dim() < 2 || t.dim() > 6) return false;
  const int64_t d1 = t.dim() - 1, d2 = t.dim() - 2;
  if (t.stride(d2) != 1 || t.stride(d1) != t.size(d2)) return false;
  int64_t size = t.size(d1) * t.size(d2);
  for (int64_t b = t.dim() - 3; b >= 0; --b) {
    if (t.stride(b) != size) return false;
    size *= t.size(b);
  }
  return !(t.size(d1) == 1 && t.size(d2) == 1);
}

// float4_e2m1 pairs: (m, k, n, x1 transposed, x2 transposed); rules in _mx_fp4_shapes of
// op_sdk/ops/quant_matmul.py, the same words.
std::tuple<int64_t, int64_t, int64_t, bool, bool> mx_fp4_shapes(const char* op, const Tensor& x1,
                                                          const Tensor& x2) {
  for (const auto& [name, x] : {std::pair<const char*, const Tensor*>{"x1", &x1}, {"x2", &x2}})
    OPK_CHECK(x->element_size() == 1 && !x->is_floating_point() && x->dim() >= 2, op, name,
              "must be a 1-byte integer tensor of at least 2 dims holding float4_e2m1 pairs "
              "(uint8 / int8), got ", dtype_name(x->scalar_type()), " of ", x->dim(), " dims");
  const bool t1 = is_transposed(x1);
  const int64_t m = t1 ? 2 * x1.size(-2) : x1.size(-2), k = t1 ? x1.size(-1) : 2 * x1.size(-1);
  OPK_CHECK(k > 2, op, "x1", "must have k > 2 with float4_e2m1 inputs (aclnnQuantMatmulV5), "
            "got k = ", k);
  const bool t2 = is_transposed(x2);
  const int64_t k2 = t2 ? 2 * x2.size(-2) : x2.size(-2), n = t2 ? x2.size(-1) : 2 * x2.size(-1);
  OPK_CHECK(k2 == k, op, "x2", "must hold k = ", k, " values along k (as x1 ",
            shape_str(x1.sizes()), t1 ? ", transposed" : "", "), got ", shape_str(x2.sizes()),
            " (", t2 ? "transposed, " : "", "k = ", k2, ")");
  check_batch_broadcast(op, x1, x2);
  return {m, k, n, t1, t2};
}

// float4_e2m1 pairs -> float64, element 2i in the low nibble: (..., r, c) packed along c ->
// (..., r, 2c), or the transpose view of a tensor packed along its last dim -> (..., 2r, c)
// (_fp4_values of op_sdk/ops/quant_matmul.py).
Tensor fp4_values(const Tensor& x, bool transposed) {
  if (transposed) return fp4_values(x.transpose(-1, -2), false).transpose(-1, -2);
  static const Tensor lut = [] {
    const double grid[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
    Tensor t = at::empty({16}, at::kDouble);
    double* p = t.data_ptr<double>();
    for (int i = 0; i < 16; ++i) p[i] = (i & 8) ? -grid[i & 7] : grid[i & 7];
    return t;
  }();
  const Tensor b = x.view(at::kByte).to(at::kLong);
  const Tensor codes = at::stack({at::bitwise_and(b, 0xF), at::bitwise_and(b.bitwise_right_shift(4), 0xF)}, -1)
                           .flatten(-2);
  return lut.index_select(0, codes.reshape({-1})).reshape(codes.sizes());
}

// MX scales: rules, formula and sources in op_sdk/ops/quant_matmul.py (check_mx,
// _mx_reference); the same ATen steps in the same order.
Tensor mx_matmul(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                 const std::optional<Tensor>& offset, const std::optional<Tensor>& pertoken,
                 const std::optional<Tensor>& bias, std::optional<int64_t> output_dtype,
                 std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
                 std::optional<int64_t> pertoken_scale_dtype, std::optional<int64_t> scale_dtype,
                 at::OptionalIntArrayRef group_sizes, const std::optional<Tensor>& y_scale) {
  const char* op = kOp;
  check_none_outside_subset(op, {{"offset", offset.has_value()}, {"y_scale", y_scale.has_value()}});
  for (const auto& [arg, v] : {std::pair<const char*, std::optional<int64_t>>{"scale_dtype", scale_dtype},
                               {"pertoken_scale_dtype", pertoken_scale_dtype}})
    OPK_CHECK(v == kE8M0, op, arg, "must be torch_npu.float8_e8m0fnu (", kE8M0, ") with MX scales "
              "(scale_dtype and pertoken_scale_dtype together), got ", dtype_value_str(v));
  const bool fp4 = x1_dtype == kFloat4E2M1 && x2_dtype == kFloat4E2M1;
  int64_t m, k, n;
  bool x1_transposed = false, x2_transposed = false;
  if (fp4) {
    std::tie(m, k, n, x1_transposed, x2_transposed) = mx_fp4_shapes(op, x1, x2);
  } else {
    const bool x1_ok = !x1_dtype.has_value() && is_float8(x1);
    QMM_UNSUPPORTED(x1_ok && !x2_dtype.has_value() && is_float8(x2), x1_ok ? "x2" : "x1",
                    "must be float8_e4m3fn or float8_e5m2, or both float4_e2m1 (x1_dtype = "
                    "x2_dtype = ", kFloat4E2M1, "), with MX scales (the supported subset), got ",
                    dtype_name(x1.scalar_type()), " / ", dtype_name(x2.scalar_type()),
                    " (x1_dtype ", dtype_value_str(x1_dtype), ", x2_dtype ",
                    dtype_value_str(x2_dtype), ")");
    std::tie(m, n) = check_matmul_shapes(op, x1, x2);
    k = x1.size(-1);
  }
  const int64_t kb64 = (k + 63) / 64;
  const std::vector<int64_t> batch =
      at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  OPK_CHECK(pertoken.has_value(), op, "pertoken_scale", "is required with MX scales");
  for (const auto& [name, t, want] :
       {std::tuple<const char*, const Tensor*, std::vector<int64_t>>{"pertoken_scale", &*pertoken,
                                                                     {m, kb64, 2}},
        {"scale", &scale, {kb64, n, 2}}}) {
    OPK_CHECK(t->element_size() == 1 && !t->is_floating_point(), op, name,
              "must be a 1-byte integer tensor holding float8_e8m0 codes (uint8 / int8) with MX "
              "scales, got ", dtype_name(t->scalar_type()));
    const bool ok = t->dim() >= 3 && t->sizes().slice(t->dim() - 3).vec() == want &&
                    broadcasts_to(t->sizes().slice(0, t->dim() - 3), batch);
    OPK_CHECK(ok, op, name, "must have shape (..., ", want[0], ", ", want[1], ", ", want[2],
              ") with MX scales (one per 32 values of k, in pairs), its batch dims broadcasting "
              "to ", shape_str(batch), ", got ", shape_str(t->sizes()));
  }
  const auto [given, gs] = infer_group_sizes(op, group_sizes, {m, n, k}, {m, n, 2 * kb64});
  OPK_CHECK(gs == std::vector<int64_t>({1, 1, kMxGroup}), op, "group_sizes", "must be [1, 1, ",
            kMxGroup, "] with MX scales (a 0 is the dim over the scale's dim), got ",
            shape_str(given), " ([gsM, gsN, gsK] = ", shape_str(gs), ")");
  if (bias.has_value()) {
    OPK_CHECK(bias->scalar_type() == at::kFloat, op, "bias", "must be float32 with MX scales, got ",
              dtype_name(bias->scalar_type()));
    check_bias_shape(op, x1, x2, *bias, n);
  }
  const int64_t code =
      dtype_arg(op, "output_dtype", output_dtype, {kFloat16, kBFloat16, kFloat32Out}, kInt8);
  const int64_t kb = (k + kMxGroup - 1) / kMxGroup;
  const Tensor xs = e8m0_to_float(*pertoken).flatten(-2).narrow(-1, 0, kb);
  const Tensor ws = e8m0_to_float(scale).transpose(-2, -1).flatten(-3, -2).narrow(-2, 0, kb);
  if (!fp4)
    return block_sum(x1.to(at::kDouble), x2.to(at::kDouble), xs, ws, kMxGroup, batch, bias,
                     code);
  return block_sum(fp4_values(x1, x1_transposed), fp4_values(x2, x2_transposed), xs, ws,
                   kMxGroup, batch, bias, code);
}

Tensor float8_matmul(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                     const std::optional<Tensor>& offset, const std::optional<Tensor>& pertoken,
                     const std::optional<Tensor>& bias, std::optional<int64_t> output_dtype,
                     std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
                     std::optional<int64_t> pertoken_scale_dtype,
                     std::optional<int64_t> scale_dtype, at::OptionalIntArrayRef group_sizes,
                     const std::optional<Tensor>& y_scale) {
  const char* op = kOp;
  check_none_outside_subset(op, {{"offset", offset.has_value()},
                                 {"pertoken_scale_dtype", pertoken_scale_dtype.has_value()},
                                 {"scale_dtype", scale_dtype.has_value()},
                                 {"group_sizes", group_sizes.has_value()},
                                 {"y_scale", y_scale.has_value()}});
  const bool hif8 = x1_dtype == kHiFloat8In && x2_dtype == kHiFloat8In;
  check_float8_inputs(op, x1, x2, x1_dtype, x2_dtype);
  QMM_UNSUPPORTED(scale.dim() == 1, "scale", "of ", scale.dim(), " dims (per-block / per-tile "
                  "scales) is outside the supported subset with float8 / hifloat8 inputs (1-D: "
                  "(1,) or (n,))");
  QMM_UNSUPPORTED(!pertoken.has_value() || pertoken->dim() == 1, "pertoken_scale", "of ",
                  pertoken.has_value() ? pertoken->dim() : 1, " dims (per-block / per-tile "
                  "scales) is outside the supported subset with float8 / hifloat8 inputs (1-D: "
                  "(1,) or (m,))");
  QMM_UNSUPPORTED(!output_dtype.has_value() ||
                      (*output_dtype != 23 && *output_dtype != 24 && *output_dtype != 290 &&
                       *output_dtype != 291 && *output_dtype != 292),
                  "output_dtype", "float8 / hifloat8 outputs are outside the supported subset "
                  "(aclnnQuantMatmulV5 documents float16 / bfloat16 / float32 outputs for float8 / "
                  "hifloat8 inputs), got ", dtype_value_str(output_dtype));
  const int64_t code =
      dtype_arg(op, "output_dtype", output_dtype, {kFloat16, kBFloat16, kFloat32Out}, kInt8);
  const auto [m, n] = check_matmul_shapes(op, x1, x2);
  const bool packed = scale.scalar_type() == at::kLong || scale.scalar_type() == at::kUInt64;
  OPK_CHECK(packed || scale.scalar_type() == at::kFloat, op, "scale", "must be float32, or int64 "
            "/ uint64 (npu_trans_quant_param's packed value), with float8 / hifloat8 inputs, got ",
            dtype_name(scale.scalar_type()));
  OPK_CHECK(scale.dim() == 1 && (scale.size(0) == 1 || scale.size(0) == n), op, "scale",
            "must have shape (1,) or (n,) = (", n, ",), got ", shape_str(scale.sizes()));
  if (pertoken.has_value()) {
    OPK_CHECK(!packed, op, "pertoken_scale", "must be None with an int64 / uint64 scale (float8 "
              "/ hifloat8 inputs take a per-token scale only with a float32 scale)");
    OPK_CHECK(pertoken->scalar_type() == at::kFloat, op, "pertoken_scale", "must be float32, got ",
              dtype_name(pertoken->scalar_type()));
    OPK_CHECK(pertoken->dim() == 1 && (pertoken->size(0) == 1 || pertoken->size(0) == m), op,
              "pertoken_scale", "must have shape (1,) or (m,) = (", m, ",), got ",
              shape_str(pertoken->sizes()));
  }
  if (bias.has_value()) {
    OPK_CHECK(bias->scalar_type() == at::kFloat, op, "bias",
              "must be float32 with float8 / hifloat8 inputs, got ",
              dtype_name(bias->scalar_type()));
    check_bias_shape(op, x1, x2, *bias, n);
  }
  Tensor out = at::matmul(float8_values(x1, hif8), float8_values(x2, hif8)).to(at::kFloat);
  // the bias (fp32, (n,) or (batch, 1, n)) last with pertoken_scale, else first
  // (_float8_reference of op_sdk/ops/quant_matmul.py)
  if (pertoken.has_value()) {
    out = out * unpack_quant_scale(scale) * pertoken->unsqueeze(-1);
    if (bias.has_value()) out = out + *bias;
    return out.to(float_output(code));
  }
  if (bias.has_value()) out = out + *bias;
  return (out * unpack_quant_scale(scale)).to(float_output(code));
}

Tensor npu_quant_matmul(const Tensor& x1, const Tensor& x2, const Tensor& scale,
                        const std::optional<Tensor>& offset,
                        const std::optional<Tensor>& pertoken_scale,
                        const std::optional<Tensor>& bias, std::optional<int64_t> output_dtype,
                        std::optional<int64_t> x1_dtype, std::optional<int64_t> x2_dtype,
                        std::optional<int64_t> pertoken_scale_dtype,
                        std::optional<int64_t> scale_dtype, at::OptionalIntArrayRef group_sizes,
                        const std::optional<Tensor>& y_scale) {
  if (scale_dtype.has_value() || pertoken_scale_dtype.has_value())
    return mx_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                     x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale);
  if (is_per_block(x1, x2, scale, pertoken_scale))
    return per_block_matmul(x1, x2, scale, offset, *pertoken_scale, bias, output_dtype,
                            x1_dtype, x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes,
                            y_scale);
  if (is_float8(x1) || is_float8(x2) || (x1_dtype == kHiFloat8In && x2_dtype == kHiFloat8In))
    return float8_matmul(x1, x2, scale, offset, pertoken_scale, bias, output_dtype, x1_dtype,
                         x2_dtype, pertoken_scale_dtype, scale_dtype, group_sizes, y_scale);
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
