// HiFloat8 encoding (torch-free): fp32 -> the HiFloat8 byte, rounding half away from zero
// and saturating to +-32768, NaN -> 0, as Ascend 950's quantisation kernels convert (the
// format and its Python twin: op_sdk/ops/_formats.py).
#pragma once

#include <cmath>
#include <cstdint>

namespace opk {

inline uint8_t float_to_hif8(float x) {
  if (std::isnan(x)) return 0;
  const float a = std::fabs(x);
  const uint8_t sign = std::signbit(x) ? 128 : 0;
  if (a >= 40960.0f) return sign | 110;  // 1.25 * 2^15 and up (inf too): the largest value
  if (a < 0x1p-23f) return 0;
  if (a < 0x1p-22f) return sign | 1;
  int exp2 = 0;
  const float mant = std::frexp(a, &exp2);  // a = mant * 2^exp2, mant in [0.5, 1)
  int e = exp2 - 1;
  const float frac = mant * 2.0f - 1.0f;  // exact
  const int ae0 = e < 0 ? -e : e;
  const int fbits = e < -15 ? 0 : (ae0 <= 3 ? 3 : (ae0 <= 7 ? 2 : 1));
  int q = int(std::floor(frac * float(1 << fbits) + 0.5f));
  if (q == (1 << fbits)) {
    e += 1;
    q = 0;
  }
  const int ae = e < 0 ? -e : e, en = e < 0 ? 1 : 0;
  int code;
  if (e < -15) code = e + 23;
  else if (e == 0) code = 8 + q;
  else if (ae == 1) code = 16 + 8 * en + q;
  else if (ae <= 3) code = 32 + 16 * en + 8 * (ae - 2) + q;
  else if (ae <= 7) code = 64 + 16 * en + 4 * (ae - 4) + q;
  else code = 96 + 16 * en + 2 * (ae - 8) + q;
  return uint8_t(sign | code);
}

}  // namespace opk
