// The output-dtype codes of Ascend 950's 8-bit float outputs (float8_e5m2, float8_e4m3fn,
// HiFloat8 as uint8 bits), as torch_npu's ScalarType extension numbers them. The launchers'
// checks accept them; the forms they select run in the reference (csrc/registry.h,
// reference_op), their one implementation.
#pragma once

#include <cstdint>

namespace opsdk {

constexpr int64_t kFloat8E5m2 = 23, kFloat8E4m3fn = 24, kHiFloat8 = 290, kNpuE5m2 = 291,
                  kNpuE4m3fn = 292;

inline bool is_float8_code(int64_t code) {
  return code == kFloat8E5m2 || code == kFloat8E4m3fn || code == kHiFloat8 ||
         code == kNpuE5m2 || code == kNpuE4m3fn;
}

}  // namespace opsdk
