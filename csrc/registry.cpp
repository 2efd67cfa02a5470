#include "registry.h"

#include <c10/util/Exception.h>

#include <exception>
#include <memory>

namespace opsdk {
namespace {

std::vector<NativeOp>& ops() {
  static std::vector<NativeOp> all;
  return all;
}

// Registrations live as long as the process (a torch::Library deregisters on destruction).
std::vector<std::unique_ptr<torch::Library>>& libraries() {
  static std::vector<std::unique_ptr<torch::Library>> all;
  return all;
}

// Runs one registration in a library of its own; returns "" or the error.
std::string try_register(const NativeOp& op, c10::DispatchKey key,
                         const std::function<void(torch::Library&)>& body) {
  try {
    auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, op.ns, key, __FILE__,
                                                __LINE__);
    body(*lib);
    libraries().push_back(std::move(lib));
    return "";
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown C++ exception";
  }
}

}  // namespace

bool add_native_op(NativeOp op) {
  ops().push_back(std::move(op));
  return true;
}

const std::vector<NativeOp>& native_ops() { return ops(); }

std::vector<std::pair<std::string, std::string>> register_native_op(const std::string& ns,
                                                                     const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const NativeOp& op : ops()) {
    if (ns != op.ns || name != op.name) continue;
    out.emplace_back("CPU", try_register(op, c10::DispatchKey::CPU, op.cpu));
    for (c10::DispatchKey key : {c10::DispatchKey::AutogradCPU, c10::DispatchKey::AutogradCUDA}) {
      out.emplace_back(c10::toString(key), try_register(op, key, [&](torch::Library& m) {
                         register_autograd(m, op.name, op.autograd);
                       }));
    }
  }
  return out;
}

}  // namespace opsdk
