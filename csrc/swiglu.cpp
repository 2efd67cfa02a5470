// CPU launchers of npu_swiglu and npu_swiglu_backward over the kernels of kernels/swiglu.h.
// Every valid call runs the kernel (any dim: the input seen as [outer, 2, inner], the two
// halves at offsets 0 and inner of each outer slab); an invalid one goes to the reference
// (op_sdk_reference::<op>), so the contract's rules and messages have one implementation
// (op_sdk/ops/swiglu.py). `valid_*` state those rules as a predicate and raise nothing.
#include <torch/library.h>

#include <algorithm>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "swiglu.h"

namespace opsdk {
namespace {

using at::Tensor;

bool valid_swiglu(const Tensor& input, int64_t dim) {
  if (!is_float_dtype(input.scalar_type()) || input.dim() == 0) return false;
  if (dim < -input.dim() || dim >= input.dim()) return false;
  return input.size(dim) % 2 == 0;
}

// [outer, 2, inner] of the input around dim (wrapped)
std::pair<int64_t, int64_t> outer_inner(const Tensor& x, int64_t dim) {
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < dim; ++k) outer *= x.size(k);
  for (int64_t k = dim + 1; k < x.dim(); ++k) inner *= x.size(k);
  return {outer, inner * (x.size(dim) / 2)};
}

Tensor npu_swiglu(const Tensor& input, int64_t dim) {
  if (!valid_swiglu(input, dim)) {
    static const auto reference = reference_op<decltype(npu_swiglu)>("npu_swiglu");
    return reference.call(input, dim);
  }
  const int64_t d = dim < 0 ? dim + input.dim() : dim;
  Tensor y = halved_output(input, d);
  if (y.numel() == 0) return y;
  const Tensor x = input.contiguous();
  const auto [outer, half] = outer_inner(x, d);
  dispatch_float(x.scalar_type(), [&](auto tx) {
    using T = decltype(tx);
    const T* px = ptr<T>(x);
    T* py = ptr<T>(y);
    parallel_halves(outer, half, [&](int64_t o, int64_t j0, int64_t j1) {
      const T* a = px + o * 2 * half;
      opk::swiglu_span<T>(a + j0, a + half + j0, py + o * half + j0, j1 - j0);
    });
  });
  return y;
}

bool valid_swiglu_backward(const Tensor& grad_output, const Tensor& input, int64_t dim) {
  if (!valid_swiglu(input, dim) || grad_output.scalar_type() != input.scalar_type() ||
      grad_output.dim() != input.dim())
    return false;
  const int64_t d = dim < 0 ? dim + input.dim() : dim;
  for (int64_t k = 0; k < input.dim(); ++k)
    if (grad_output.size(k) != (k == d ? input.size(k) / 2 : input.size(k))) return false;
  return true;
}

Tensor npu_swiglu_backward(const Tensor& grad_output, const Tensor& input, int64_t dim) {
  if (!valid_swiglu_backward(grad_output, input, dim)) {
    static const auto reference =
        reference_op<decltype(npu_swiglu_backward)>("npu_swiglu_backward");
    return reference.call(grad_output, input, dim);
  }
  LikeOutput out = output_like(input, input.scalar_type());  // input's layout (empty_like)
  if (input.numel() == 0) return out.finish();
  const int64_t d = dim < 0 ? dim + input.dim() : dim;
  const Tensor x = input.contiguous(), g = grad_output.contiguous();
  const auto [outer, half] = outer_inner(x, d);
  dispatch_float(x.scalar_type(), [&](auto tx) {
    using T = decltype(tx);
    const T *px = ptr<T>(x), *pg = ptr<T>(g);
    T* pw = ptr<T>(out.work);
    parallel_halves(outer, half, [&](int64_t o, int64_t j0, int64_t j1) {
      const int64_t a = o * 2 * half + j0;
      opk::swiglu_backward_span<T>(pg + o * half + j0, px + a, px + a + half, pw + a,
                                   pw + a + half, j1 - j0);
    });
  });
  return out.finish();
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_swiglu, &npu_swiglu, kDifferentiable);
OPSDK_NATIVE_OP(npu, npu_swiglu_backward, &npu_swiglu_backward, kNotDifferentiable);

}  // namespace opsdk
