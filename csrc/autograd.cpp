// Autograd{CPU,CUDA} kernels for the operators that have no derivative.
//
// They run the operator below autograd and give float outputs a grad_fn that raises at
// backward time, naming the operator (ATen's autogradNotImplementedFallback). Registered
// in C++ because a Python autograd kernel costs ~4 us per eager call, as much as the
// fused kernel itself at decode sizes. op_sdk.library.define_op registers a Python
// autograd kernel only where none is registered here (the differentiable norms).
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

namespace {
constexpr const char* kNonDifferentiable[] = {
    "npu_add_rms_norm_cast",  "npu_dynamic_quant",
    "npu_quantize",           "npu_add_rms_norm_quant",
    "npu_add_rms_norm_dynamic_quant", "npu_quant_matmul",
    "npu_transpose_batchmatmul",
};
}  // namespace

TORCH_LIBRARY_IMPL(npu, AutogradCPU, m) {
  for (const char* name : kNonDifferentiable) {
    m.impl(name, torch::autograd::autogradNotImplementedFallback());
  }
}

TORCH_LIBRARY_IMPL(npu, AutogradCUDA, m) {
  for (const char* name : kNonDifferentiable) {
    m.impl(name, torch::autograd::autogradNotImplementedFallback());
  }
}
