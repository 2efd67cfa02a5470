// CPU launcher of npu_rotary_mul: the forms of the hot path (no `rotate` matrix) run the row
// kernel of kernels/rotary.h; every other call, valid or not, goes to the operator's
// reference (op_sdk_reference::npu_rotary_mul), so the contract's rules and their error
// messages have one implementation (op_sdk/ops/rotary_mul.py). `fast_form` only says which
// calls the kernel takes: each condition is one of those rules, so a call it admits is valid.
#include <torch/library.h>

#include <string>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "rotary.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kMaxD = 1024;

int mode_code(c10::string_view m) {
  if (m == "half") return opk::kRotaryHalf;
  if (m == "interleave") return opk::kRotaryInterleave;
  if (m == "quarter") return opk::kRotaryQuarter;
  if (m == "interleave-half") return opk::kRotaryInterleaveHalf;
  return -1;
}

bool broadcasts_to(const Tensor& r, const Tensor& x) {
  if (!is_float_dtype(r.scalar_type()) || r.dim() != x.dim() || r.size(-1) != x.size(-1)) return false;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (r.size(i) != 1 && r.size(i) != x.size(i)) return false;
  return true;
}

bool fast_form(const Tensor& x, const Tensor& r1, const Tensor& r2, int mode,
               const std::optional<Tensor>& rotate) {
  if (rotate.has_value() || mode < 0 || !is_float_dtype(x.scalar_type()) || (x.dim() != 3 && x.dim() != 4))
    return false;
  const int64_t d = x.size(-1), step = mode == opk::kRotaryQuarter ? 4 : 2;
  return d > 0 && d <= kMaxD && d % step == 0 && broadcasts_to(r1, x) &&
         r2.sizes() == r1.sizes() && broadcasts_to(r2, x);
}

Tensor npu_rotary_mul(const Tensor& input, const Tensor& r1, const Tensor& r2,
                      c10::string_view rotary_mode, const std::optional<Tensor>& rotate) {
  const int mode = mode_code(rotary_mode);
  if (!fast_form(input, r1, r2, mode, rotate)) {
    static const auto reference = reference_op<decltype(npu_rotary_mul)>("npu_rotary_mul");
    return reference.call(input, r1, r2, rotary_mode, rotate);
  }
  const auto dt = input.scalar_type();
  const Tensor x = input.contiguous();
  // cos / sin rounded to the input's dtype (op-plugin casts them), rows of d contiguous,
  // broadcast dims as stride 0
  const Tensor c = r1.to(dt).contiguous().expand(input.sizes());
  const Tensor s = r2.to(dt).contiguous().expand(input.sizes());
  Tensor y = new_output(input.sizes(), input.options());  // contiguous: torch_npu's Meta
  const int64_t d = x.size(-1), nd = x.dim(), rows = x.numel() / d;
  if (rows == 0) return y;
  // runs of the rows of dim -2 (the heads of a token, or the tokens of a head) share one
  // stride through cos / sin (0 where they broadcast): one kernel call per run, and the
  // cos / sin offset of a run from the dims before it
  const int64_t run = x.size(-2), runs = rows / run;
  // (a dim of size 1 may carry any stride, and cos / sin may differ there: a run of one row
  // steps nowhere; otherwise r1 / r2 of one shape, made contiguous and expanded, agree)
  const int64_t cs_stride = run > 1 ? c.stride(-2) : 0;
  TORCH_INTERNAL_ASSERT(run == 1 || s.stride(-2) == cs_stride);
  dispatch_float(dt, [&](auto tx) {
    using T = decltype(tx);
    parallel_rows(runs, run * d, [&](int64_t b, int64_t e) {
      opk::RowBuffer<float> scratch(2 * d);
      for (int64_t g = b; g < e; ++g) {
        int64_t rem = g, off = 0;  // g over the dims before -2, last fastest
        for (int64_t k = nd - 3; k >= 0; --k) {
          const int64_t i = rem % x.size(k);
          rem /= x.size(k);
          off += i * c.stride(k);
        }
        opk::rotary_rows<T>(ptr<T>(x) + g * run * d, ptr<T>(c) + off, ptr<T>(s) + off,
                            cs_stride, ptr<T>(y) + g * run * d, run, d, mode, scratch.data);
      }
    });
  });
  return y;
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_rotary_mul, &npu_rotary_mul, kDifferentiable);

}  // namespace opsdk
