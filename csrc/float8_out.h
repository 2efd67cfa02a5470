// The 8-bit float outputs of Ascend 950 quantisation (float8_e5m2, float8_e4m3fn, HiFloat8 as
// uint8 bits) as ATen calls: the C++ twins of op_sdk/ops/_formats.py's quantize_float8 and
// dynamic_quant_float8. Codes: 23 / 291 float8_e5m2, 24 / 292 float8_e4m3fn, 290 HiFloat8.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstdint>

#include "hifloat8.h"

namespace opsdk {

constexpr int64_t kFloat8E5m2 = 23, kFloat8E4m3fn = 24, kHiFloat8 = 290, kNpuE5m2 = 291,
                  kNpuE4m3fn = 292;

inline bool is_float8_code(int64_t code) {
  return code == kFloat8E5m2 || code == kFloat8E4m3fn || code == kHiFloat8 ||
         code == kNpuE5m2 || code == kNpuE4m3fn;
}

// The largest finite value of an 8-bit float output code.
inline double float8_max(int64_t code) {
  if (code == kHiFloat8) return 32768.0;
  return (code == kFloat8E5m2 || code == kNpuE5m2) ? 57344.0 : 448.0;
}

// The storage dtype of an 8-bit float output code (HiFloat8: its bits in uint8).
inline c10::ScalarType float8_storage(int64_t code) {
  if (code == kHiFloat8) return at::kByte;
  return (code == kFloat8E5m2 || code == kNpuE5m2) ? at::kFloat8_e5m2 : at::kFloat8_e4m3fn;
}

// fp32 values -> the 8-bit float format of `code`, saturating: float8 half to even (NaN stays
// NaN), HiFloat8 half away from zero (NaN -> 0).
inline at::Tensor float8_quant(const at::Tensor& v, int64_t code) {
  if (code == kHiFloat8) {
    const at::Tensor src = v.contiguous();
    at::Tensor out = at::empty(src.sizes(), src.options().dtype(at::kByte));
    const float* in = src.data_ptr<float>();
    uint8_t* o = out.data_ptr<uint8_t>();
    at::parallel_for(0, src.numel(), 16384, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) o[i] = opk::float_to_hif8(in[i]);
    });
    return out;
  }
  const double fmax = float8_max(code);
  return v.clamp(-fmax, fmax).to(float8_storage(code));
}

// Symmetric dynamic quantisation of fp32 `v` (950 kernels): scale = amax * fp32(1 / dmax),
// y = cast(v / scale); 0 where amax is 0. `amax` broadcasts against `v`. Returns (y, scale).
inline std::tuple<at::Tensor, at::Tensor> dynamic_quant_float8(const at::Tensor& v,
                                                               const at::Tensor& amax,
                                                               int64_t code, float dmax) {
  const float inv = 1.0f / dmax;
  const at::Tensor scale = amax * at::scalar_tensor(inv, amax.options());
  const at::Tensor pos = scale > 0;
  const at::Tensor q = at::where(pos, v / at::where(pos, scale, at::ones_like(scale)),
                                 at::zeros_like(v));
  return {float8_quant(q, code), scale};
}

}  // namespace opsdk
