// CPU launcher of op_sdk::rms_norm_rope (op_sdk/ops/rms_norm_rope.py): the calls of its hot
// form (no copy of x where its last dim is contiguous: Qwen3's transposed heads) run the
// row kernel of kernels/rms_norm_rope.h; every other call, valid or not, goes to the
// operator's reference (op_sdk_reference::rms_norm_rope), so the contract's rules and their
// errors have one implementation. `fast_form` only says which calls the kernel takes: each
// condition is one of those rules, so a call it admits is valid.
#include <torch/library.h>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "rms_norm_launch.h"
#include "rms_norm_rope.h"
#include "rotary_launch.h"

namespace opsdk {
namespace {

using at::Tensor;

bool fast_form(const Tensor& x, const Tensor& gamma, const Tensor& cos, const Tensor& sin) {
  if (!is_float_dtype(x.scalar_type()) || (x.dim() != 3 && x.dim() != 4)) return false;
  const int64_t d = x.size(-1);
  return d > 0 && d <= kRotaryMaxD && d % 2 == 0 && gamma.dim() == 1 && gamma.size(0) == d &&
         rms_norm_gamma_pairs(x.scalar_type(), gamma.scalar_type()) &&
         rotary_tables_fit(cos, sin, x);
}

Tensor rms_norm_rope(const Tensor& input, const Tensor& gamma, const Tensor& cos,
                     const Tensor& sin, double epsilon) {
  if (!fast_form(input, gamma, cos, sin)) {
    static const auto reference = reference_op<decltype(rms_norm_rope)>("rms_norm_rope");
    return reference.call(input, gamma, cos, sin, epsilon);
  }
  const auto dt = input.scalar_type();
  // rows of d contiguous elements; the leading dims keep their strides (no copy of a
  // transposed view)
  const Tensor x = input.stride(-1) == 1 ? input : input.contiguous();
  const Tensor g = gamma.contiguous();
  // cos / sin rounded to the input's dtype (op-plugin's rule), broadcast dims as stride 0
  const Tensor c = cos.to(dt).contiguous().expand(input.sizes());
  const Tensor s = sin.to(dt).contiguous().expand(input.sizes());
  Tensor y = new_output(input.sizes(), input.options());  // contiguous, as the fake
  const int64_t d = x.size(-1), nd = x.dim(), rows = x.numel() / d;
  if (rows == 0) return y;
  // runs along rd, the innermost dim before the last whose size is not 1: a run's rows step
  // by one stride through x and one (0 where they broadcast) through cos / sin
  int64_t rd = nd - 2;
  while (rd > 0 && x.size(rd) == 1) --rd;
  const int64_t run = x.size(rd), runs = rows / run;
  const int64_t x_step = run > 1 ? x.stride(rd) : 0, cs_step = run > 1 ? c.stride(rd) : 0;
  // non-temporal stores for large aligned outputs (both halves of a row start aligned)
  const bool stream = d % 32 == 0 && stream_friendly(y, d);
  dispatch_float(dt, [&](auto tx) {
    using T = decltype(tx);
    auto launch = [&](auto tg) {
      using G = decltype(tg);
      parallel_rows(runs, run * d, [&](int64_t b, int64_t e) {
        opk::RowBuffer<float> scratch(6 * d);  // kernels/rms_norm_rope.h
        for (int64_t r = b; r < e; ++r) {
          int64_t rem = r, xo = 0, co = 0;  // r over the dims before rd, the last fastest
          for (int64_t k = rd - 1; k >= 0; --k) {
            const int64_t i = rem % x.size(k);
            rem /= x.size(k);
            xo += i * x.stride(k);
            co += i * c.stride(k);
          }
          opk::rms_norm_rope_rows<T, G>(ptr<T>(x) + xo, x_step, ptr<G>(g), ptr<T>(c) + co,
                                        ptr<T>(s) + co, cs_step, ptr<T>(y) + r * run * d, run,
                                        d, float(epsilon), scratch.data, stream);
        }
      });
    };
    if (g.scalar_type() == at::kFloat) launch(float{});
    else launch(T{});
  });
  return y;
}

}  // namespace

OPSDK_NATIVE_OP(op_sdk, rms_norm_rope, &rms_norm_rope, kDifferentiable);

}  // namespace opsdk
