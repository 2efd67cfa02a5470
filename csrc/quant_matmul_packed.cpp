// CPU launchers of pack_quant_weight and quant_matmul_packed (op_sdk's own operators, one
// slice: quant_matmul_packed reads what pack_quant_weight writes; the rules are in
// op_sdk/ops/quant_matmul_packed.py). pack_quant_weight lays an int8 (k, n) weight out for
// the kernels of kernels/quant_matmul_packed.h; quant_matmul_packed is npu_quant_matmul's
// int8 operator (quant_matmul_impl of csrc/quant_matmul_launch.h) on that copy while x2 is
// the weight it was packed from (on x2 as it lies otherwise).
#include <torch/library.h>

#include <cstdint>

#include "checks.h"
#include "launch.h"
#include "quant_matmul_launch.h"
#include "quant_matmul_packed.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr const char* kPackedOp = "quant_matmul_packed";
constexpr const char* kPackOp = "pack_quant_weight";

// pack_quant_weight / quant_matmul_packed: see op_sdk/ops/quant_matmul_packed.py.
void check_pack_x2(const char* op, const Tensor& x2) {
  OPK_CHECK(x2.scalar_type() == at::kChar, op, "x2", "must be int8, got ",
            dtype_name(x2.scalar_type()));
  OPK_CHECK(x2.dim() == 2, op, "x2", "must be 2-D (k, n), got ", x2.dim(), " dims");
}

Tensor pack_quant_weight(const Tensor& x2) {
  check_pack_x2(kPackOp, x2);
  const int64_t k = x2.size(0), n = x2.size(1);
  Tensor out = new_output({opk::packed::total_bytes(n, k)}, x2.options());  // huge pages: read per call
  opk::packed::pack(ptr<int8_t>(x2), x2.stride(1), x2.stride(0), n, k, ptr<int8_t>(out));
  return out;
}

Tensor quant_matmul_packed(const Tensor& x1, const Tensor& x2, const Tensor& packed,
                           const Tensor& scale, const std::optional<Tensor>& offset,
                           const std::optional<Tensor>& pertoken_scale,
                           const std::optional<Tensor>& bias,
                           std::optional<int64_t> output_dtype) {
  check_pack_x2(kPackedOp, x2);
  const int64_t code = check_quant_matmul(kPackedOp, x1, x2, scale, offset, pertoken_scale, bias,
                                          output_dtype, false, false, false, false, false, false);
  const int64_t k = x2.size(0), n = x2.size(1);
  OPK_CHECK(packed.scalar_type() == at::kChar && packed.dim() == 1 &&
                packed.numel() == opk::packed::total_bytes(n, k) && packed.is_contiguous(),
            kPackedOp, "packed", "must be pack_quant_weight(x2): contiguous int8 of ",
            opk::packed::total_bytes(n, k), " bytes, got ", dtype_name(packed.scalar_type()),
            " ", shape_str(packed.sizes()));
  // the packed copy stands for x2 only while x2 is the weight it was packed from, viewed
  // the same way (a replaced parameter is a new tensor: multiply by it as it lies)
  const int8_t* pw = ptr<int8_t>(packed);
  const bool same = opk::packed::source_of(pw, n, k) ==
                    opk::packed::Source{int64_t(reinterpret_cast<uintptr_t>(x2.data_ptr())),
                                        k, n, x2.stride(0), x2.stride(1)};
  return quant_matmul_impl(code, x1, x2, same ? pw : nullptr, scale, offset, pertoken_scale,
                           bias);
}

}  // namespace

OPSDK_NATIVE_OP(op_sdk, pack_quant_weight, &pack_quant_weight, kNotDifferentiable);
OPSDK_NATIVE_OP(op_sdk, quant_matmul_packed, &quant_matmul_packed, kNotDifferentiable);

}  // namespace opsdk
