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
// Each operator names its kind beside its kernel (OPSDK_NATIVE_OP); op_sdk.library's
// define_op registers the Python kernels around these (see _register_autograd).
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd_not_implemented_fallback.h>

#include "registry.h"

namespace opsdk {
namespace {

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

}  // namespace

void register_autograd(torch::Library& m, const char* name, Autograd kind) {
  if (kind == Autograd::kDifferentiable)
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&differentiable_kernel>());
  else
    m.impl(name, torch::autograd::autogradNotImplementedFallback());
}

}  // namespace opsdk
