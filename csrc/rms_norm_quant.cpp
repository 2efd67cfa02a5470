// CPU launcher of npu_rms_norm_quant: the contract's checks (the same rules and words as
// op_sdk/ops/rms_norm_quant.py), gamma / beta up-cast once, the reciprocal of scale in fp32,
// rows split over threads, the row kernel of kernels/norm_quant.h.
#include <torch/library.h>

#include "checks.h"
#include "launch.h"
#include "norm_quant.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kInt8 = 1, kQUInt4x2 = 16;

// Returns the dst_dtype code.
int64_t check_rms_norm_quant(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                             const Tensor& scale, const Tensor& offset,
                             std::optional<int64_t> dst_dtype) {
  const char* op = "npu_rms_norm_quant";
  check_float_dtype(x, op, "x", /*half_only=*/true);
  OPK_CHECK(x.dim() >= 1 && x.dim() <= 8, op, "x", "must have 1 to 8 dims, got ", x.dim());
  const int64_t d = x.size(-1);
  OPK_CHECK(gamma.scalar_type() == x.scalar_type(), op, "gamma", "must have the dtype of 'x' (",
            dtype_name(x.scalar_type()), "), got ", dtype_name(gamma.scalar_type()));
  const bool g_ok = (gamma.dim() == 1 && gamma.size(0) == d) ||
                    (gamma.dim() == 2 && gamma.size(0) == 1 && gamma.size(1) == d);
  OPK_CHECK(g_ok, op, "gamma", "must have shape [", d, "] or [1, ", d,
            "] (x's last dim), got ", shape_str(gamma.sizes()));
  OPK_CHECK(beta.sizes() == gamma.sizes() && beta.scalar_type() == gamma.scalar_type(), op,
            "beta", "must have gamma's shape and dtype (", shape_str(gamma.sizes()), ", ",
            dtype_name(gamma.scalar_type()), "), got (", shape_str(beta.sizes()), ", ",
            dtype_name(beta.scalar_type()), ")");
  OPK_CHECK(scale.scalar_type() == x.scalar_type() && scale.dim() == 1 && scale.size(0) == 1,
            op, "scale", "must have the dtype of 'x' (", dtype_name(x.scalar_type()),
            ") and shape [1], got (", dtype_name(scale.scalar_type()), ", ",
            shape_str(scale.sizes()), ")");
  OPK_CHECK(offset.scalar_type() == at::kChar && offset.sizes() == scale.sizes(), op, "offset",
            "must be int8 of scale's shape [1], got (", dtype_name(offset.scalar_type()), ", ",
            shape_str(offset.sizes()), ")");
  const int64_t code = dtype_arg(op, "dst_dtype", dst_dtype, {kInt8, kQUInt4x2}, kInt8);
  if (code == kQUInt4x2)
    OPK_CHECK(d % 8 == 0, op, "x",
              "last dim must be a multiple of 8 for int4 (quint4x2) output, got ", d);
  return code;
}

Tensor npu_rms_norm_quant(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                          const Tensor& scale, const Tensor& offset, double epsilon,
                          std::optional<int64_t> dst_dtype) {
  const bool int4 =
      check_rms_norm_quant(x, gamma, beta, scale, offset, dst_dtype) == kQUInt4x2;
  const Tensor a = x.contiguous();
  const int64_t n = a.size(-1), rows = n > 0 ? a.numel() / n : 0;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (int4) shape.back() /= 8;
  // contiguous (torch_npu's Meta: torch.empty of x's size)
  Tensor y = new_output(shape, x.options().dtype(int4 ? at::kInt : at::kChar));
  if (rows == 0 || n == 0) return y;
  const Tensor g = gamma.to(at::kFloat).contiguous(), b = beta.to(at::kFloat).contiguous();
  // the reciprocal in fp32, as ops-nn's kernel takes it (1 / (float)scale)
  const float inv_scale = 1.0f / scale.to(at::kFloat).item<float>();
  const float off = float(offset.item<int8_t>());
  dispatch_float(a.scalar_type(), [&](auto tx) {
    using T = decltype(tx);
    opk::RmsNormQuantParams<T> p{ptr<T>(a), ptr<float>(g), ptr<float>(b), inv_scale, off,
                                 int4 ? nullptr : ptr<int8_t>(y),
                                 int4 ? ptr<int32_t>(y) : nullptr, n, float(epsilon)};
    parallel_rows(rows, n, [&](int64_t r0, int64_t r1) { opk::rms_norm_quant_rows<T>(p, r0, r1); });
  });
  return y;
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_rms_norm_quant, &npu_rms_norm_quant, kNotDifferentiable);

}  // namespace opsdk
