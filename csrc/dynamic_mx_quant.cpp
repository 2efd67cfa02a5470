// CPU launcher and row kernel of npu_dynamic_mx_quant's hot form: blocks of 32 along the
// last dim (vllm-ascend's every call), float8 outputs with scale_alg 0 or 1, float4 outputs
// with scale_alg 0, no dst_type_max / max_low_bound. The arithmetic is the contract's
// (op_sdk/ops/_mx.py, docs/operators.md "MX quantisation"), bit for bit. Every other call
// (other axes or block sizes, scale_alg 2, a dst_type_max or max_low_bound, and every call
// that breaks a rule) goes to the reference, so the rules and their words have one
// implementation: fast_form() below only says which valid calls this kernel computes.
#include <torch/library.h>

#include <cmath>
#include <cstring>

#include "checks.h"
#include "float8_codes.h"
#include "launch.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kBlock = 32;
constexpr int64_t kFp4E2m1 = 296, kFp4E1m2 = 297;

enum class Dst { kE4m3, kE5m2, kE2m1, kE1m2 };

struct MxForm {
  Dst dst;
  int alg;
  int round;  // 0 rint, 1 round, 2 floor
};

// The calls this kernel computes (all valid); std::nullopt: the reference's
std::optional<MxForm> fast_form(const Tensor& x, int64_t axis, c10::string_view round_mode,
                                int64_t dst_type, int64_t block_size,
                                std::optional<int64_t> scale_alg, double dst_type_max,
                                double max_low_bound) {
  if (!is_float_dtype(x.scalar_type()) || x.dim() < 1 || x.dim() > 7) return std::nullopt;
  if (axis != -1 && axis != x.dim() - 1) return std::nullopt;
  if (block_size != kBlock || dst_type_max != 0.0 || max_low_bound != 0.0) return std::nullopt;
  const int alg = static_cast<int>(scale_alg.value_or(0));
  Dst dst;
  if (dst_type == kFloat8E4m3fn || dst_type == kNpuE4m3fn) dst = Dst::kE4m3;
  else if (dst_type == kFloat8E5m2 || dst_type == kNpuE5m2) dst = Dst::kE5m2;
  else if (dst_type == kFp4E2m1) dst = Dst::kE2m1;
  else if (dst_type == kFp4E1m2) dst = Dst::kE1m2;
  else return std::nullopt;
  const bool fp4 = dst == Dst::kE2m1 || dst == Dst::kE1m2;
  int round = -1;
  if (round_mode == "rint") round = 0;
  else if (fp4 && round_mode == "round") round = 1;
  else if (fp4 && round_mode == "floor") round = 2;
  if (round < 0) return std::nullopt;
  if (fp4 ? alg != 0 : (alg != 0 && alg != 1)) return std::nullopt;
  if (fp4 && x.size(-1) % 2 != 0) return std::nullopt;
  return MxForm{dst, alg, round};
}

inline uint32_t bits_of(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

// The E8M0 code of a block whose (finite) amax is `a`, and whether its code-0 values are
// scaled by 0 (OCP) instead of 2^127 (op_sdk/ops/_mx.py block_codes)
inline int block_code(float a, Dst dst, int alg, float inv_max) {
  static constexpr int kEmax[] = {8, 15, 2, 0};
  if (alg == 0) {
    const int e = static_cast<int>((bits_of(a) >> 23) & 0xFF);
    return std::max(e - kEmax[static_cast<int>(dst)], 0);
  }
  if (a == 0.0f) return 0;
  const uint32_t b = bits_of(a * inv_max);
  const int e = static_cast<int>((b >> 23) & 0xFF);
  const uint32_t m = b & 0x7FFFFF;
  const bool up = (e > 0 && e < 254 && m > 0) || (e == 0 && m > 0x400000);
  return e + (up ? 1 : 0);
}

// float4: the format's value nearest by the round mode (op_sdk/ops/_mx.py _fp4_round), as a
// 4-bit code (sign in bit 3)
inline uint8_t fp4_code(float v32, Dst dst, int round) {
  const double v = v32;
  double step = 0.25, top = 1.75;
  if (dst == Dst::kE2m1) {
    int e;
    std::frexp(v, &e);
    step = std::ldexp(1.0, std::max(e - 1, 0) - 1);
    top = 6.0;
  }
  const double t = v / step;
  double r;
  if (round == 0) r = std::nearbyint(t);  // the default rounding mode: half to even
  else if (round == 1) r = std::copysign(std::floor(std::fabs(t) + 0.5), t);
  else r = std::floor(t);
  const double mag = std::min(std::fabs(r * step), top);
  int code;
  if (dst == Dst::kE1m2) code = static_cast<int>(mag * 4.0);
  else code = mag < 2.0 ? static_cast<int>(mag * 2.0) : mag < 4.0 ? static_cast<int>(mag) + 2
                                                                    : (mag == 4.0 ? 6 : 7);
  return static_cast<uint8_t>(code | (std::signbit(v32) ? 8 : 0));  // a zero keeps v's sign
}

template <typename T>
void mx_rows(const T* x, uint8_t* y, uint8_t* scale, int64_t r0, int64_t r1, int64_t n,
             const MxForm& f) {
  const int64_t nb = (n + kBlock - 1) / kBlock, pairs = (nb + 1) / 2;
  const bool fp4 = f.dst == Dst::kE2m1 || f.dst == Dst::kE1m2;
  const float max = f.dst == Dst::kE4m3 ? 448.0f : 57344.0f;
  const float inv_max = 1.0f / max;  // fl(1 / max), one IEEE division
  const int64_t y_row = fp4 ? n / 2 : n;
  float v[kBlock];
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    uint8_t* yr = y + r * y_row;
    uint8_t* sr = scale + r * pairs * 2;
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t j0 = b * kBlock, len = std::min(kBlock, n - j0);
      float amax = 0.0f;
      bool finite = true;
      for (int64_t j = 0; j < len; ++j) {
        v[j] = opk::to_float(xr[j0 + j]);
        finite = finite && std::isfinite(v[j]);
        amax = std::max(amax, std::fabs(v[j]));
      }
      const int code = finite ? block_code(amax, f.dst, f.alg, inv_max) : 255;
      sr[b] = static_cast<uint8_t>(code);
      // 2^(127 - code), exact (2^-127 is a float subnormal); OCP scales code 0 by 0
      float factor = std::ldexp(1.0f, 127 - std::min(code, 254));
      if (code == 0 && f.alg == 0) factor = 0.0f;
      for (int64_t j = 0; j < len; ++j) v[j] = finite ? v[j] * factor : 0.0f;
      if (fp4) {
        for (int64_t j = 0; j < len; j += 2) {
          const uint8_t lo = fp4_code(v[j], f.dst, f.round);
          const uint8_t hi = fp4_code(v[j + 1], f.dst, f.round);
          yr[(j0 + j) / 2] = static_cast<uint8_t>(lo | (hi << 4));
        }
      } else if (f.dst == Dst::kE4m3) {
        for (int64_t j = 0; j < len; ++j) {
          const c10::Float8_e4m3fn q(std::min(std::max(v[j], -max), max));
          std::memcpy(yr + j0 + j, &q, 1);
        }
      } else {
        for (int64_t j = 0; j < len; ++j) {
          const c10::Float8_e5m2 q(std::min(std::max(v[j], -max), max));
          std::memcpy(yr + j0 + j, &q, 1);
        }
      }
    }
    if (nb % 2) sr[nb] = 0;  // the even padding
  }
}

std::tuple<Tensor, Tensor> npu_dynamic_mx_quant(const Tensor& input, int64_t axis,
                                                c10::string_view round_mode, int64_t dst_type,
                                                int64_t block_size,
                                                std::optional<int64_t> scale_alg,
                                                double dst_type_max, double max_low_bound) {
  const auto form = fast_form(input, axis, round_mode, dst_type, block_size, scale_alg,
                              dst_type_max, max_low_bound);
  if (!form.has_value()) {  // off the hot form (or a broken rule): the reference
    static const auto reference =
        reference_op<decltype(npu_dynamic_mx_quant)>("npu_dynamic_mx_quant");
    return reference.call(input, axis, round_mode, dst_type, block_size, scale_alg,
                          dst_type_max, max_low_bound);
  }
  const MxForm f = *form;
  const bool fp4 = f.dst == Dst::kE2m1 || f.dst == Dst::kE1m2;
  const Tensor x = input.contiguous();
  const int64_t n = x.size(-1), rows = leading_numel(x, 1);
  const int64_t pairs = ((n + kBlock - 1) / kBlock + 1) / 2;
  std::vector<int64_t> s_shape(x.sizes().begin(), x.sizes().end());
  s_shape.back() = pairs;
  s_shape.push_back(2);
  Tensor scale = new_output(s_shape, x.options().dtype(at::kByte));
  LikeOutput yl = fp4 ? LikeOutput::itself(halved_output(x, x.dim() - 1, at::kByte))
                      : output_like(input, f.dst == Dst::kE4m3 ? at::kFloat8_e4m3fn
                                                               : at::kFloat8_e5m2);
  if (x.numel() == 0) return {yl.finish(), scale};
  uint8_t* yp = reinterpret_cast<uint8_t*>(yl.work.data_ptr());
  uint8_t* sp = scale.data_ptr<uint8_t>();
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* xp = ptr<T>(x);
    parallel_rows(rows, n, [&](int64_t b, int64_t e) { mx_rows<T>(xp, yp, sp, b, e, n, f); });
  });
  return {yl.finish(), scale};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_dynamic_mx_quant, &npu_dynamic_mx_quant, kNotDifferentiable);

}  // namespace opsdk
