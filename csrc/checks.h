// Constraint checks of the C++ launchers. Every message reads
//   "<operator>: argument '<name>' <rule>"
// with the same words as the Python fake / reference checks (op_sdk/ops/_common.py), so a
// test can match operator and argument on both paths. Failures raise RuntimeError.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>

#define OPK_CHECK(cond, op, arg, ...) \
  TORCH_CHECK((cond), op, ": argument '", arg, "' ", __VA_ARGS__)

namespace opsdk {

// Python's spelling of a dtype ("torch.bfloat16"), as the reference checks print it.
inline std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    case at::kQInt8: return "torch.qint8";
    case at::kQUInt8: return "torch.quint8";
    case at::kQInt32: return "torch.qint32";
    case at::kQUInt4x2: return "torch.quint4x2";
    case at::kFloat8_e4m3fn: return "torch.float8_e4m3fn";
    case at::kFloat8_e5m2: return "torch.float8_e5m2";
    default: return std::string("torch.") + c10::toString(t);
  }
}

// The codes of `int dtype` arguments (the contract's table).
inline std::string dtype_code_name(int64_t code) {
  switch (code) {
    case 0: return "torch.uint8";
    case 1: return "torch.int8";
    case 3: return "torch.int32";
    case 5: return "torch.float16";
    case 6: return "torch.float32";
    case 12: return "torch.qint8";
    case 13: return "torch.quint8";
    case 14: return "torch.qint32";
    case 15: return "torch.bfloat16";
    case 16: return "torch.quint4x2";
    case 23: return "torch.float8_e5m2";
    case 24: return "torch.float8_e4m3fn";
    case 285: return "torch_npu.int4";
    case 290: return "torch_npu.hifloat8";
    case 291: return "torch_npu.float8_e5m2";
    case 292: return "torch_npu.float8_e4m3fn";
    default: return std::to_string(code);
  }
}

// The value of an `int dtype` argument in an error: "torch.bfloat16 (15)", "None".
inline std::string dtype_value_str(std::optional<int64_t> value) {
  if (!value.has_value()) return "None";
  const std::string name = dtype_code_name(*value);
  return name == std::to_string(*value) ? name : name + " (" + std::to_string(*value) + ")";
}

inline std::string shape_str(at::IntArrayRef s) { return c10::str(s); }

constexpr const char* kFloatDtypes = "float16/bfloat16/float32";
constexpr const char* kHalfDtypes = "float16/bfloat16";

inline bool is_float_dtype(c10::ScalarType t) {
  return t == at::kHalf || t == at::kBFloat16 || t == at::kFloat;
}
inline bool is_half_dtype(c10::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// check_dtype of _common.py for the float families.
inline void check_float_dtype(const at::Tensor& t, const char* op, const char* arg,
                              bool half_only = false) {
  const bool ok = half_only ? is_half_dtype(t.scalar_type()) : is_float_dtype(t.scalar_type());
  OPK_CHECK(ok, op, arg, "must have dtype ", half_only ? kHalfDtypes : kFloatDtypes, ", got ",
            dtype_name(t.scalar_type()));
}

// check_1d of _common.py.
inline void check_1d(const at::Tensor& t, const char* op, const char* arg, int64_t n) {
  OPK_CHECK(t.dim() == 1 && t.size(0) == n, op, arg, "must be 1-D of length ", n,
            ", got shape ", shape_str(t.sizes()));
}

// dtype_arg of _common.py: normalise an `int dtype` argument and check it is allowed.
inline int64_t dtype_arg(const char* op, const char* arg, std::optional<int64_t> value,
                         std::initializer_list<int64_t> allowed, int64_t dflt) {
  const int64_t code = value.has_value() ? *value : dflt;
  for (int64_t a : allowed)
    if (a == code) return code;
  std::ostringstream names;
  bool first = true;
  for (int64_t a : allowed) {
    names << (first ? "" : ", ") << dtype_value_str(a);
    first = false;
  }
  TORCH_CHECK(false, op, ": argument '", arg, "' must be one of ", names.str(), ", got ",
              dtype_value_str(value));
}

// check_gamma of op_sdk/ops/_norm.py: gamma covers the trailing dims of x.
inline void check_gamma(const char* op, const at::Tensor& x, const at::Tensor& gamma,
                        const char* xname) {
  OPK_CHECK(gamma.dim() >= 1 && gamma.dim() <= x.dim(), op, "gamma", "must have 1 to ", xname,
            ".dim() = ", x.dim(), " dims, got ", gamma.dim());
  OPK_CHECK(x.sizes().slice(x.dim() - gamma.dim()) == gamma.sizes(), op, "gamma",
            "must match the trailing dims of '", xname, "' ", shape_str(x.sizes()), ", got ",
            shape_str(gamma.sizes()));
}

// check_add_rms_norm of op_sdk/ops/_norm.py.
inline void check_add_rms_norm(const char* op, const at::Tensor& x1, const at::Tensor& x2,
                               const at::Tensor& gamma, bool half_only, int64_t min_dims = 1,
                               int64_t max_dims = 8) {
  check_float_dtype(x1, op, "x1", half_only);
  OPK_CHECK(x1.dim() >= min_dims && x1.dim() <= max_dims, op, "x1", "must have ", min_dims,
            " to ", max_dims, " dims, got ", x1.dim());
  OPK_CHECK(x2.sizes() == x1.sizes(), op, "x2", "must have the same shape as 'x1', got ",
            shape_str(x2.sizes()), " and ", shape_str(x1.sizes()));
  OPK_CHECK(x2.scalar_type() == x1.scalar_type(), op, "x2", "must have the dtype of 'x1' (",
            dtype_name(x1.scalar_type()), "), got ", dtype_name(x2.scalar_type()));
  OPK_CHECK(gamma.scalar_type() == x1.scalar_type(), op, "gamma",
            "must have the dtype of 'x1' (", dtype_name(x1.scalar_type()), "), got ",
            dtype_name(gamma.scalar_type()));
  check_gamma(op, x1, gamma, "x1");
}

}  // namespace opsdk
