// CPU launcher of npu_add_rms_norm: add_rms_norm_run (csrc/add_rms_norm_launch.h): the
// contract's checks (op_sdk/ops/add_rms_norm.py has the same rules), inputs made contiguous,
// the dtype dispatched, rows split over threads, the row kernel of kernels/rms_norm.h.
#include <torch/library.h>

#include "add_rms_norm_launch.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

std::tuple<Tensor, Tensor, Tensor> npu_add_rms_norm(const Tensor& x1, const Tensor& x2,
                                                    const Tensor& gamma, double epsilon) {
  return add_rms_norm_run("npu_add_rms_norm", x1, x2, gamma, epsilon);
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_add_rms_norm, &npu_add_rms_norm, kDifferentiable);

}  // namespace opsdk
