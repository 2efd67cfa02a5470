// Autograd{CPU,CUDA} kernels of the native operators, registered in C++ because a Python
// autograd kernel costs ~4 us per eager call, as much as a fused kernel at decode sizes,
// and ~20-30 us when Inductor's C++ wrapper calls the operator (it takes the GIL).
//
// * Operators with no derivative: ATen's autogradNotImplementedFallback, which runs the
//   operator below autograd and gives float outputs a grad_fn that raises at backward
//   time, naming the operator.
// * The differentiable norms (their backward is written once, in Python, op_sdk/ops):
//   a call that records no graph (grad mode off, or no input that requires grad) runs
//   below autograd here; one that does goes on to the Python autograd kernel, which
//   op_sdk.library registers under the Autograd alias key (it covers AutogradOther, which
//   this kernel redispatches to; AutogradCPU / AutogradCUDA are taken by this kernel).
//
// op_sdk.library.define_op registers the Python kernels around these (see
// _register_autograd).
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>
#include <torch/library.h>

namespace {
constexpr const char* kNonDifferentiable[] = {
    "npu_add_rms_norm_cast",  "npu_dynamic_quant",
    "npu_quantize",           "npu_add_rms_norm_quant",
    "npu_add_rms_norm_dynamic_quant", "npu_quant_matmul",
    "npu_transpose_batchmatmul",
};
constexpr const char* kDifferentiable[] = {"npu_rms_norm", "npu_add_rms_norm"};
// op_sdk's own operators (namespace op_sdk), none differentiable
constexpr const char* kOpSdkNonDifferentiable[] = {"pack_quant_weight", "quant_matmul_packed"};

bool records_graph(const c10::OperatorHandle& op, const torch::jit::Stack* stack) {
  if (!c10::GradMode::is_enabled()) return false;
  const size_t n = op.schema().arguments().size();
  for (const c10::IValue& v : torch::jit::last(*stack, n))
    if (v.isTensor() && v.toTensor().requires_grad()) return true;
  return false;
}

void differentiable_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                           torch::jit::Stack* stack) {
  if (!records_graph(op, stack)) {
    at::AutoDispatchBelowADInplaceOrView guard;
    op.redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
    return;
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::AutogradOther) |
                         (ks & c10::after_autograd_keyset),
                     stack);
}

template <size_t N>
void register_not_differentiable(torch::Library& m, const char* const (&names)[N]) {
  for (const char* name : names) m.impl(name, torch::autograd::autogradNotImplementedFallback());
}

void register_npu(torch::Library& m) {
  register_not_differentiable(m, kNonDifferentiable);
  for (const char* name : kDifferentiable)
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&differentiable_kernel>());
}
}  // namespace

TORCH_LIBRARY_IMPL(npu, AutogradCPU, m) { register_npu(m); }
TORCH_LIBRARY_IMPL(npu, AutogradCUDA, m) { register_npu(m); }
TORCH_LIBRARY_IMPL(op_sdk, AutogradCPU, m) { register_not_differentiable(m, kOpSdkNonDifferentiable); }
TORCH_LIBRARY_IMPL(op_sdk, AutogradCUDA, m) { register_not_differentiable(m, kOpSdkNonDifferentiable); }
