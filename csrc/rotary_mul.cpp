// CPU launchers of npu_rotary_mul, npu_interleave_rope and npu_apply_rotary_pos_emb: the forms of the hot path (no `rotate` matrix) run the row
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
#include "rotary_launch.h"

namespace opsdk {
namespace {

using at::Tensor;

int mode_code(c10::string_view m) {
  if (m == "half") return opk::kRotaryHalf;
  if (m == "interleave") return opk::kRotaryInterleave;
  if (m == "quarter") return opk::kRotaryQuarter;
  if (m == "interleave-half") return opk::kRotaryInterleaveHalf;
  return -1;
}

bool fast_form(const Tensor& x, const Tensor& r1, const Tensor& r2, int mode,
               const std::optional<Tensor>& rotate) {
  if (rotate.has_value() || mode < 0 || !is_float_dtype(x.scalar_type()) || (x.dim() != 3 && x.dim() != 4))
    return false;
  const int64_t d = x.size(-1), step = mode == opk::kRotaryQuarter ? 4 : 2;
  return d > 0 && d <= kRotaryMaxD && d % step == 0 && rotary_tables_fit(r1, r2, x);
}

// A(x) * r1 + B(x) * r2 in `mode` for a call of the fast form, contiguous.
Tensor rotary(const Tensor& input, const Tensor& r1, const Tensor& r2, int mode) {
  const auto dt = input.scalar_type();
  const Tensor x = input.contiguous();
  // cos / sin rounded to the input's dtype (op-plugin casts them), rows of d contiguous,
  // broadcast dims as stride 0
  const Tensor c = r1.to(dt).contiguous().expand(input.sizes());
  const Tensor s = r2.to(dt).contiguous().expand(input.sizes());
  Tensor y = new_output(input.sizes(), input.options());  // contiguous: torch_npu's Meta
  const int64_t d = x.size(-1), nd = x.dim(), rows = x.numel() / d;
  if (rows == 0) return y;
  // runs of the rows of the innermost dim before the last one whose size is not 1 (dim -2:
  // the heads of a token, or the tokens of a head; dim -3 where S = 1, as in decode's
  // (B, N, 1, D)) share one stride through cos / sin (0 where they broadcast): one kernel
  // call per run, and the cos / sin offset of a run from the dims before it
  int64_t rd = nd - 2;
  while (rd > 0 && x.size(rd) == 1) --rd;
  const int64_t run = x.size(rd), runs = rows / run;
  // (a dim of size 1 may carry any stride, and cos / sin may differ there: a run of one row
  // steps nowhere; otherwise r1 / r2 of one shape, made contiguous and expanded, agree)
  const int64_t cs_stride = run > 1 ? c.stride(rd) : 0;
  TORCH_INTERNAL_ASSERT(run == 1 || s.stride(rd) == cs_stride);
  dispatch_float(dt, [&](auto tx) {
    using T = decltype(tx);
    parallel_rows(runs, run * d, [&](int64_t b, int64_t e) {
      opk::RowBuffer<float> scratch(2 * d);
      for (int64_t g = b; g < e; ++g) {
        int64_t rem = g, off = 0;  // g over the dims before rd, last fastest
        for (int64_t k = rd - 1; k >= 0; --k) {
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

Tensor npu_rotary_mul(const Tensor& input, const Tensor& r1, const Tensor& r2,
                      c10::string_view rotary_mode, const std::optional<Tensor>& rotate) {
  const int mode = mode_code(rotary_mode);
  if (!fast_form(input, r1, r2, mode, rotate)) {
    static const auto reference = reference_op<decltype(npu_rotary_mul)>("npu_rotary_mul");
    return reference.call(input, r1, r2, rotary_mode, rotate);
  }
  return rotary(input, r1, r2, mode);
}

// y in x's layout, as torch_npu's Meta allocates it (empty_like: x's strides where x is
// dense, else contiguous); `rotary` writes y contiguous
Tensor in_layout_of(const Tensor& x, const Tensor& y) {
  if (x.is_contiguous()) return y;
  Tensor out = at::empty_like(x);
  return out.is_contiguous() ? y : out.copy_(y);
}

// npu_interleave_rope (op_sdk/ops/interleave_rope.py): npu_rotary_mul's "interleave-half"
// mode on x (B, N, S, 64) with cos / sin of x's dtype and shape (B or 1, 1, S or 1, 64),
// written in x's layout (torch_npu's Meta: empty_like); other calls go to its reference.
bool interleave_fast_form(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  if (!is_float_dtype(x.scalar_type()) || x.dim() != 4 || x.size(3) != 64 || cos.dim() != 4 ||
      cos.scalar_type() != x.scalar_type() || sin.scalar_type() != x.scalar_type() ||
      sin.sizes() != cos.sizes())
    return false;
  return (cos.size(0) == 1 || cos.size(0) == x.size(0)) && cos.size(1) == 1 &&
         (cos.size(2) == 1 || cos.size(2) == x.size(2)) && cos.size(3) == 64;
}

Tensor npu_interleave_rope(const Tensor& x, const Tensor& cos, const Tensor& sin) {
  if (!interleave_fast_form(x, cos, sin)) {
    static const auto reference =
        reference_op<decltype(npu_interleave_rope)>("npu_interleave_rope");
    return reference.call(x, cos, sin);
  }
  return in_layout_of(x, rotary(x, cos, sin, opk::kRotaryInterleaveHalf));
}

// npu_apply_rotary_pos_emb (op_sdk/ops/apply_rotary_pos_emb.py): npu_rotary_mul's "half" /
// "quarter" / "interleave" on query and on key with one cos / sin, each result in its
// input's layout; other calls go to its reference. The layouts: (rank, the head dim N)
bool apply_fast_form(const Tensor& q, const Tensor& k, const Tensor& cos, const Tensor& sin,
                     c10::string_view layout, int mode) {
  if (mode != opk::kRotaryHalf && mode != opk::kRotaryQuarter && mode != opk::kRotaryInterleave)
    return false;
  int64_t rank = 4, n = 2;
  if (layout == "BNSD") {
    n = 1;
  } else if (layout == "TND") {
    rank = 3;
    n = 1;
  } else if (layout != "BSND" && layout != "BSH" && layout != "SBND") {
    return false;
  }
  const auto dt = q.scalar_type();
  if (!is_float_dtype(dt) || k.scalar_type() != dt || cos.scalar_type() != dt ||
      sin.scalar_type() != dt || q.dim() != rank || k.dim() != rank || cos.dim() != rank ||
      sin.sizes() != cos.sizes() || (q.size(-1) != 64 && q.size(-1) != 128))
    return false;
  for (int64_t i = 0; i < rank; ++i)
    if ((i != n && k.size(i) != q.size(i)) || cos.size(i) != (i == n ? 1 : q.size(i))) return false;
  return true;
}

std::tuple<Tensor, Tensor> npu_apply_rotary_pos_emb(const Tensor& query, const Tensor& key,
                                                    const Tensor& cos, const Tensor& sin,
                                                    c10::string_view layout,
                                                    c10::string_view rotary_mode) {
  const int mode = mode_code(rotary_mode);
  if (!apply_fast_form(query, key, cos, sin, layout, mode)) {
    static const auto reference =
        reference_op<decltype(npu_apply_rotary_pos_emb)>("npu_apply_rotary_pos_emb");
    return reference.call(query, key, cos, sin, layout, rotary_mode);
  }
  return {in_layout_of(query, rotary(query, cos, sin, mode)),
          in_layout_of(key, rotary(key, cos, sin, mode))};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_rotary_mul, &npu_rotary_mul, kDifferentiable);
OPSDK_NATIVE_OP(npu, npu_interleave_rope, &npu_interleave_rope, kNotDifferentiable);
OPSDK_NATIVE_OP(npu, npu_apply_rotary_pos_emb, &npu_apply_rotary_pos_emb, kNotDifferentiable);

}  // namespace opsdk
