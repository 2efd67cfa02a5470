// CPU launcher of npu_clipped_swiglu over the kernels of kernels/swiglu.h. x is seen as
// [pre, n] around dim (the NPU kernel's tiling); each of the first `rows` rows (all, or
// sum(group_index) at most pre) runs clipped_swiglu_pairs (interleaved: adjacent pairs of
// the row) or clipped_swiglu_span (the row's two halves); the other rows are 0. An invalid
// call goes to the reference (op_sdk_reference::npu_clipped_swiglu), so the contract's rules
// and messages have one implementation (op_sdk/ops/clipped_swiglu.py); `valid` states them
// as a predicate and raises nothing.
#include <torch/library.h>

#include <cstring>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "swiglu.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kMaxDims = 8, kMaxGroups = 8192;

// the rows computed, or -1 where the call breaks a rule
int64_t valid_rows(const Tensor& x, const std::optional<Tensor>& group_index, int64_t dim,
                   double limit, int64_t pre) {
  if (!is_float_dtype(x.scalar_type()) || x.dim() < 1 || x.dim() > kMaxDims) return -1;
  if (dim < -x.dim() || dim >= x.dim() || x.size(dim) % 2 != 0 || !(limit > 0)) return -1;
  if (!group_index.has_value()) return pre;
  const Tensor& g = *group_index;
  if (g.scalar_type() != at::kLong || g.dim() != 1 || g.size(0) > kMaxGroups) return -1;
  const Tensor gc = g.contiguous();
  const int64_t* pg = gc.data_ptr<int64_t>();
  int64_t sum = 0;
  for (int64_t i = 0; i < gc.numel(); ++i) {
    if (pg[i] < 0) return -1;
    sum = pg[i] > pre - sum ? pre : sum + pg[i];  // at most pre, no overflow
  }
  return sum;
}

Tensor npu_clipped_swiglu(const Tensor& x, const std::optional<Tensor>& group_index, int64_t dim,
                          double alpha, double limit, double bias, bool interleaved) {
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  const int64_t pre = (d >= 0 && d < x.dim()) ? leading_numel(x, x.dim() - d) : 0;
  const int64_t rows = valid_rows(x, group_index, dim, limit, pre);
  if (rows < 0) {
    static const auto reference =
        reference_op<decltype(npu_clipped_swiglu)>("npu_clipped_swiglu");
    return reference.call(x, group_index, dim, alpha, limit, bias, interleaved);
  }
  Tensor y = halved_output(x, d);
  if (y.numel() == 0) return y;
  const Tensor xc = x.contiguous();
  const int64_t half = y.numel() / pre;  // outputs per row
  const float fa = static_cast<float>(alpha), fl = static_cast<float>(limit),
              fb = static_cast<float>(bias);
  dispatch_float(xc.scalar_type(), [&](auto tx) {
    using T = decltype(tx);
    const T* px = ptr<T>(xc);
    T* py = ptr<T>(y);
    parallel_halves(rows, half, [&](int64_t r, int64_t j0, int64_t j1) {
      const T* row = px + r * 2 * half;
      if (interleaved)
        opk::clipped_swiglu_pairs<T>(row + 2 * j0, py + r * half + j0, j1 - j0, fa, fl, fb);
      else
        opk::clipped_swiglu_span<T>(row + j0, row + half + j0, py + r * half + j0, j1 - j0, fa,
                                    fl, fb);
    });
    if (rows < pre) std::memset(py + rows * half, 0, sizeof(T) * (pre - rows) * half);
  });
  return y;
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_clipped_swiglu, &npu_clipped_swiglu, kNotDifferentiable);

}  // namespace opsdk
