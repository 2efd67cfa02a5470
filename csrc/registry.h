// The native operators of op_sdk._C, recorded at load time and registered with the
// dispatcher only when Python asks (op_sdk.library.define_op, through
// op_sdk._C.register_kernels), one operator at a time.
//
// Registering from static initialisers (TORCH_LIBRARY_IMPL) would abort the process on
// the first error: when another library (torch_npu) registered a kernel for the same
// schema with a different C++ signature, the dispatcher throws, and an exception out of
// a static initialiser is std::terminate. Here every registration runs inside a try
// block, and a failure reaches Python as a message naming the operator and dispatch key.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <functional>
#include <string>
#include <vector>

namespace opsdk {

// What the operator's Autograd{CPU,CUDA} kernels are (csrc/autograd.cpp).
enum class Autograd {
  kNotDifferentiable,  // ATen's autogradNotImplementedFallback: runs below autograd
  kDifferentiable,     // no-grad calls stay in C++, the others go to the Python backward
};

struct NativeOp {
  const char* ns;
  const char* name;
  std::function<void(torch::Library&)> cpu;  // m.impl(name, &kernel)
  Autograd autograd;
};

// Records one operator; called from static initialisers (OPSDK_NATIVE_OP). Touches no
// dispatcher state.
bool add_native_op(NativeOp op);

const std::vector<NativeOp>& native_ops();

// Registers ns::name's CPU kernel and its AutogradCPU / AutogradCUDA kernels, each on
// its own, and returns (dispatch key, error message or "") for each attempt. Unknown
// operators give an empty list. Never throws.
std::vector<std::pair<std::string, std::string>> register_native_op(const std::string& ns,
                                                                     const std::string& name);

// The operator's reference, registered by define_op(..., reference_op=True) as
// op_sdk_reference::<name> with the operator's schema: where a launcher routes a form off
// its hot path, so that the form's rules and formula have one implementation (the
// reference). `Sig` is the launcher's own signature (the schema's C++ one). Call once into
// a function-local static: the lookup throws until Python has registered the operator.
template <class Sig>
c10::TypedOperatorHandle<Sig> reference_op(const char* name) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow((std::string("op_sdk_reference::") + name).c_str(), "")
      .template typed<Sig>();
}

// Autograd kernels of one operator (csrc/autograd.cpp).
void register_autograd(torch::Library& m, const char* name, Autograd kind);

}  // namespace opsdk

#define OPSDK_CONCAT_(a, b) a##b
#define OPSDK_CONCAT(a, b) OPSDK_CONCAT_(a, b)
// One line per native operator, beside its kernel: the dispatcher checks the kernel's C++
// signature against the schema (and against any other library's kernel for it) when
// Python registers it.
#define OPSDK_NATIVE_OP(ns, name, kernel, autograd)                                       \
  static const bool OPSDK_CONCAT(opsdk_native_op_, __COUNTER__) = ::opsdk::add_native_op( \
      {#ns, #name, [](torch::Library& m) { m.impl(#name, kernel); },                    \
       ::opsdk::Autograd::autograd})
