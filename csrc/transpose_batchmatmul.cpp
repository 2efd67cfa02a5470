// CPU launcher of npu_transpose_batchmatmul: the checks of op_sdk/ops/transpose_batchmatmul.py
// in the same words, then the batched product written straight into the (M, B, N) output.
//
// Few rows (M <= OP_SDK_TBMM_MAX_M, default 16; above 8 rows only up to 2^23 multiply-adds
// in all) with a (B, K, N) weight of contiguous rows: the register-blocked kernel of
// kernels/batch_matmul.h, threaded over (batch, column panel). Otherwise ATen's bmm into
// the permuted output view, except for 16-bit inputs on the AVX2 paths: there ATen's
// bf16 / fp16 bmm has no native GEMM to call (no AVX-512 BF16 / AMX), so the register-
// blocked kernel takes every row count.
#include <torch/library.h>

#include <vector>

#include "batch_matmul.h"
#include "checks.h"
#include "launch.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr const char* kOp = "npu_transpose_batchmatmul";
constexpr int64_t kLimit = 65536;

std::vector<int64_t> perm_or(at::OptionalIntArrayRef p, std::vector<int64_t> dflt) {
  return p.has_value() ? p->vec() : dflt;
}

bool is_perm(const std::vector<int64_t>& p, std::initializer_list<int64_t> want) {
  return p == std::vector<int64_t>(want);
}

struct Plan {
  bool x_swapped, w_swapped;
  int64_t b, m, k, n, f;
};

Plan check_transpose_batchmatmul(const Tensor& input, const Tensor& weight,
                                 const std::optional<Tensor>& bias,
                                 const std::optional<Tensor>& scale,
                                 at::OptionalIntArrayRef perm_x1, at::OptionalIntArrayRef perm_x2,
                                 at::OptionalIntArrayRef perm_y,
                                 std::optional<int64_t> batch_split_factor) {
  OPK_CHECK(!bias.has_value(), kOp, "bias", "must be None");
  const auto p1 = perm_or(perm_x1, {0, 1, 2}), p2 = perm_or(perm_x2, {0, 1, 2}),
             py = perm_or(perm_y, {1, 0, 2});
  OPK_CHECK(is_perm(p1, {0, 1, 2}) || is_perm(p1, {1, 0, 2}), kOp, "perm_x1",
            "must be [0, 1, 2] or [1, 0, 2], got ", c10::IntArrayRef(p1));
  OPK_CHECK(is_perm(p2, {0, 1, 2}) || is_perm(p2, {0, 2, 1}), kOp, "perm_x2",
            "must be [0, 1, 2] or [0, 2, 1], got ", c10::IntArrayRef(p2));
  OPK_CHECK(is_perm(py, {1, 0, 2}), kOp, "perm_y", "must be [1, 0, 2], got ",
            c10::IntArrayRef(py));
  OPK_CHECK(input.dim() == 3, kOp, "input", "must be 3-D, got ", input.dim(), " dims");
  OPK_CHECK(weight.dim() == 3, kOp, "weight", "must be 3-D, got ", weight.dim(), " dims");
  check_float_dtype(input, kOp, "input");
  OPK_CHECK(weight.scalar_type() == input.scalar_type(), kOp, "weight",
            "must have the dtype of 'input' (", dtype_name(input.scalar_type()), "), got ",
            dtype_name(weight.scalar_type()));
  Plan p{is_perm(p1, {1, 0, 2}), is_perm(p2, {0, 2, 1}), 0, 0, 0, 0, 1};
  p.b = input.size(p.x_swapped ? 1 : 0);
  p.m = input.size(p.x_swapped ? 0 : 1);
  p.k = input.size(2);
  const int64_t wb = weight.size(0), wk = weight.size(p.w_swapped ? 2 : 1);
  p.n = weight.size(p.w_swapped ? 1 : 2);
  OPK_CHECK(wb == p.b, kOp, "weight", "batch ", wb, " must equal the input's batch ", p.b);
  OPK_CHECK(wk == p.k, kOp, "weight", "reduction dim ", wk, " must equal the input's K = ",
            p.k);
  OPK_CHECK(p.b < kLimit, kOp, "input", "batch B must be < ", kLimit, ", got ", p.b);
  OPK_CHECK(p.n < kLimit, kOp, "weight", "N must be < ", kLimit, ", got ", p.n);
  p.f = batch_split_factor.has_value() ? *batch_split_factor : 1;
  OPK_CHECK(p.f >= 1, kOp, "batch_split_factor", "must be >= 1, got ", p.f);
  OPK_CHECK((p.b * p.n) % p.f == 0, kOp, "batch_split_factor", "must divide B * N = ",
            p.b * p.n, ", got ", p.f);
  if (scale.has_value()) {
    // the int8-output path (aclnnTransposeBatchMatMul): float16 in, int8 out
    OPK_CHECK(input.scalar_type() == at::kHalf, kOp, "scale",
              "(int8 output) requires float16 input, got ", dtype_name(input.scalar_type()));
    OPK_CHECK(scale->scalar_type() == at::kLong || scale->scalar_type() == at::kFloat, kOp,
              "scale", "must be int64 (npu_trans_quant_param's packed value) or float32, got ",
              dtype_name(scale->scalar_type()));
    OPK_CHECK(scale->dim() == 1 && scale->size(0) == p.b * p.n, kOp, "scale",
              "must be 1-D of length B * N = ", p.b * p.n, ", got ", shape_str(scale->sizes()));
    OPK_CHECK(p.f == 1, kOp, "batch_split_factor", "must be 1 with scale, got ", p.f);
  }
  return p;
}

// The int8-output path: fp32 accumulator * scale (an int64 packed parameter holds the fp32
// bits of the scale, low 13 mantissa bits cleared, in its low word), rounded half to even
// and saturated (NaN to 0), as (M, 1, B * N). ATen calls, the arithmetic of
// op_sdk/ops/transpose_batchmatmul.py.
Tensor transpose_batchmatmul_int8(const Tensor& x, const Tensor& w, const Tensor& scale,
                                  const Plan& p) {
  const Tensor s = unpack_quant_scale(scale);
  const Tensor acc = at::bmm(x.to(at::kFloat), w.to(at::kFloat)) * s.reshape({p.b, 1, p.n});
  const Tensor q = quantize_round(acc, -128.0, 127.0, at::kChar);
  return q.permute({1, 0, 2}).reshape({p.m, 1, p.b * p.n}).contiguous();
}

int64_t small_m_limit() {
  static const int64_t v = env_limit("OP_SDK_TBMM_MAX_M", 16);
  return v;
}

Tensor npu_transpose_batchmatmul(const Tensor& input, const Tensor& weight,
                                 const std::optional<Tensor>& bias,
                                 const std::optional<Tensor>& scale,
                                 at::OptionalIntArrayRef perm_x1, at::OptionalIntArrayRef perm_x2,
                                 at::OptionalIntArrayRef perm_y,
                                 std::optional<int64_t> batch_split_factor) {
  const Plan p = check_transpose_batchmatmul(input, weight, bias, scale, perm_x1, perm_x2,
                                             perm_y, batch_split_factor);
  // (B, M, K) and (B, K, N) views of the operands
  const Tensor x = p.x_swapped ? input.permute({1, 0, 2}) : input;
  const Tensor w = p.w_swapped ? weight.transpose(1, 2) : weight;
  if (scale.has_value()) return transpose_batchmatmul_int8(x, w, *scale, p);
  Tensor out = new_output({p.m, p.b, p.n}, input.options());
  if (out.numel() > 0) {
    // above 8 rows only small problems (decode-sized heads): on larger ones oneDNN's
    // AMX-bf16 GEMM wins (32 heads x 16 rows x 128 x 512: 263 us against 364 us here)
    const bool few = p.m <= 8 || p.b * p.m * p.k * p.n <= (int64_t(1) << 23);
    const bool slow_aten = input.scalar_type() != at::kFloat &&
                           (opk::isa() == opk::Isa::avx2 || opk::isa() == opk::Isa::avx2_vnni);
    const bool small = ((p.m <= small_m_limit() && few) || slow_aten) &&
                       (p.n <= 1 || w.stride(2) == 1);
    if (!small) {
      Tensor out_bmn = out.permute({1, 0, 2});
      at::bmm_out(out_bmn, x, w);
    } else if (p.k == 0) {
      out.zero_();
    } else {
      const Tensor xr = x.stride(2) == 1 ? x : x.contiguous();
      // ~8 KB of weight columns per task, at least 128 columns (the one-row register
      // block is 8 vectors wide: 128 columns with AVX-512)
      const int64_t panel = std::max<int64_t>(128, (8192 / std::max<int64_t>(p.k, 1)) / 64 * 64);
      const int64_t panels = (p.n + panel - 1) / panel;
      dispatch_float(input.scalar_type(), [&](auto tx) {
        using T = decltype(tx);
        const T* xp = ptr<T>(xr);
        const T* wp = ptr<T>(w);
        T* op = ptr<T>(out);
        const int64_t grain = std::max<int64_t>(1, 65536 / std::max<int64_t>(1, p.m * p.k * panel));
        at::parallel_for(0, p.b * panels, grain, [&](int64_t t0, int64_t t1) {
          opk::RowBuffer<float> xf(p.m * p.k);
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t bi = t / panels, j0 = (t % panels) * panel;
            opk::small_m_matmul<T>(xp + bi * xr.stride(0), xr.stride(1), wp + bi * w.stride(0),
                                   w.stride(1), op + bi * p.n, p.b * p.n, p.m, p.k, j0,
                                   std::min(p.n, j0 + panel), xf.data);
          }
        });
      });
    }
  }
  if (p.f > 1)
    return out.reshape({p.m, p.f, p.b * p.n / p.f}).transpose(0, 1).contiguous();
  return out;
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_transpose_batchmatmul, &npu_transpose_batchmatmul, kNotDifferentiable);

}  // namespace opsdk
