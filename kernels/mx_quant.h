// MX quantisation row kernels (torch-free): npu_dynamic_mx_quant's hot form and the fused
// norms npu_rms_norm_dynamic_mx_quant / npu_add_rms_norm_dynamic_mx_quant. Blocks of 32
// along the last dim; the arithmetic of op_sdk/ops/_mx.py (docs/operators.md "MX
// quantisation"), bit for bit: the scalar per-block parts here, the per-value loops in
// mx_quant.inl (compiled per instruction set, written branch-free so that each set's
// compiler flags vectorise them).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "rms_norm.h"  // the norms' row helpers (load_row_sumsq, add_row_sumsq, normed)
#include "simd.h"

namespace opk {

constexpr int64_t kMxBlock = 32;

enum class MxDst : int { e4m3 = 0, e5m2 = 1, e2m1 = 2, e1m2 = 3 };

// A call's form: destination, scale_alg (0 OCP, 1 cuBLAS) and, for float4, the round mode
// (0 rint, 1 round half away from zero, 2 floor)
struct MxForm {
  MxDst dst;
  int alg;
  int round;
};

inline bool mx_fp4(MxDst d) { return d == MxDst::e2m1 || d == MxDst::e1m2; }
inline float mx_max(MxDst d) {
  static constexpr float kMax[] = {448.0f, 57344.0f, 6.0f, 1.75f};
  return kMax[static_cast<int>(d)];
}
// bytes of y per row of n values, and scale codes per row (the blocks padded to pairs)
inline int64_t mx_y_row(MxDst d, int64_t n) { return mx_fp4(d) ? n / 2 : n; }
inline int64_t mx_scale_row(int64_t n) { return ((n + kMxBlock - 1) / kMxBlock + 1) / 2 * 2; }

inline uint32_t mx_bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}
inline float mx_float(uint32_t b) {
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

// The E8M0 code of a block whose finite amax is `a` (op_sdk/ops/_mx.py block_codes)
inline int mx_block_code(float a, MxDst dst, int alg) {
  static constexpr int kEmax[] = {8, 15, 2, 0};
  if (alg == 0) {
    const int e = static_cast<int>((mx_bits(a) >> 23) & 0xFF);
    return std::max(e - kEmax[static_cast<int>(dst)], 0);
  }
  if (a == 0.0f) return 0;
  static constexpr float kInvMax[] = {1.0f / 448.0f, 1.0f / 57344.0f};  // fl(1 / max)
  const float inv_max = kInvMax[static_cast<int>(dst)];  // (float8 only: scale_alg 1)
  const uint32_t b = mx_bits(a * inv_max);
  const int e = static_cast<int>((b >> 23) & 0xFF);
  const uint32_t m = b & 0x7FFFFF;
  const bool up = (e > 0 && e < 254 && m > 0) || (e == 0 && m > 0x400000);
  return e + (up ? 1 : 0);
}

// The factor a block's values are multiplied by: 2^(127 - code), exact (2^-127 is a float
// subnormal); OCP scales a code-0 block by 0
inline float mx_factor(int code, int alg) {
  if (code == 0 && alg == 0) return 0.0f;
  // 2^e for e = 127 - code in [-127, 127]: a normal's exponent field, or 2^-127's bits
  return code < 254 ? mx_float(uint32_t(254 - code) << 23) : mx_float(0x00400000u);
}

// float4 by round mode "round" / "floor": the format's value nearest by that mode
// (op_sdk/ops/_mx.py _fp4_round), as a 4-bit code (sign in bit 3); "rint" has a
// branch-free form in mx_quant.inl
inline uint8_t mx_fp4_code(float v32, MxDst dst, int round) {
  const double v = v32;
  double step = 0.25, top = 1.75;
  if (dst == MxDst::e2m1) {
    int e;
    std::frexp(v, &e);
    step = std::ldexp(1.0, std::max(e - 1, 0) - 1);
    top = 6.0;
  }
  const double t = v / step;
  const double r = round == 1 ? std::copysign(std::floor(std::fabs(t) + 0.5), t) : std::floor(t);
  const double mag = std::min(std::fabs(r * step), top);
  int code;
  if (dst == MxDst::e1m2) code = static_cast<int>(mag * 4.0);
  else code = mag < 2.0 ? static_cast<int>(mag * 2.0) : mag < 4.0 ? static_cast<int>(mag) + 2
                                                                    : (mag == 4.0 ? 6 : 7);
  return static_cast<uint8_t>(code | (std::signbit(v32) ? 8 : 0));  // a zero keeps v's sign
}

}  // namespace opk

#define OPK_KERNEL_BODY "mx_quant.inl"
#include "isa_expand.h"

namespace opk {

// npu_dynamic_mx_quant over `rows` contiguous rows of n values: y (mx_y_row bytes a row),
// scale (mx_scale_row codes a row)
template <typename T>
void mx_quant_rows(const T* x, uint8_t* y, uint8_t* scale, int64_t rows, int64_t n,
                   const MxForm& f) {
  OPK_ISA_CALL(mx_quant_rows, x, y, scale, rows, n, f);
}

// The fused norms: the fp32 norm of x (or of x1 + x2, whose rounded sum goes to xo) times
// gamma, plus beta (may be null), rounded to T, MX quantised; rstd one float a row.
template <typename T, typename G>
void norm_mx_quant_rows(const T* x1, const T* x2, const G* gamma, const G* beta, uint8_t* y,
                        uint8_t* scale, float* rstd, T* xo, int64_t rows, int64_t n, float eps,
                        const MxForm& f) {
  OPK_ISA_CALL(norm_mx_quant_rows, x1, x2, gamma, beta, y, scale, rstd, xo, rows, n, eps, f);
}

}  // namespace opk
