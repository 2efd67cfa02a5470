// Torch-free test of the portable kernels (kernels/*.h, namespace opk::generic): the only
// ones an aarch64 host runs. Built natively by tests/toolchain/test_portable.py, and for
// aarch64 with a cross compiler, run under qemu-user where it is installed.
//
// Checks: the software fp16 conversions against an independent reference (and against
// F16C on x86); the row kernels against plain scalar references written here; and, on
// x86-64, that the generic kernels give the AVX2 kernels' results bit for bit.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "quant.h"
#include "rms_norm.h"

namespace {

int failures = 0;

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      if (++failures <= 20) {                                    \
        std::printf("FAIL %s:%d: ", __FILE__, __LINE__);         \
        std::printf(__VA_ARGS__);                                \
        std::printf("\n");                                       \
      }                                                          \
    }                                                            \
  } while (0)

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The value of a finite half, exactly, in double.
double half_value(uint16_t h) {
  const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  const double mag = exp == 0 ? std::ldexp(double(man), -24) : std::ldexp(double(1024 + man), exp - 25);
  return (h & 0x8000) ? -mag : mag;
}

// Nearest half to a finite float, ties to even, by search over the ordered magnitudes.
uint16_t reference_half(float f) {
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const double a = std::fabs(double(f));
  if (a >= 65520.0) return sign | 0x7c00;
  uint16_t lo = 0, hi = 0x7bff;  // largest magnitude <= a
  while (lo < hi) {
    const uint16_t mid = uint16_t((lo + hi + 1) / 2);
    if (half_value(mid) <= a) lo = mid;
    else hi = uint16_t(mid - 1);
  }
  uint16_t r = lo;
  if (lo < 0x7bff || half_value(lo) < a) {
    const double d0 = a - half_value(lo), d1 = half_value(uint16_t(lo + 1)) - a;
    if (d1 < d0 || (d1 == d0 && (lo & 1))) r = uint16_t(lo + 1);
  }
  return sign | r;
}

void test_fp16_conversions() {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = opk::fp16_bits_to_float(uint16_t(h));
    const bool nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff) != 0;
#if OPK_X86
    CHECK(bits(f) == bits(_cvtsh_ss(uint16_t(h))), "half %04x -> float %08x", h, bits(f));
#endif
    if (nan) {
      CHECK(std::isnan(f), "half %04x is not NaN", h);
      CHECK(opk::fp16_bits_rne(f) == (h | 0x200), "NaN %04x not quieted", h);
    } else {
      if (((h >> 10) & 0x1f) != 0x1f) CHECK(double(f) == half_value(uint16_t(h)), "half %04x value", h);
      CHECK(opk::fp16_bits_rne(f) == h, "half %04x does not round-trip", h);
    }
  }
  std::mt19937 rng(1);
  std::vector<float> values = {0.0f, -0.0f, 65504.0f, 65519.99f, 65520.0f, 1e-8f, 2.98e-8f,
                               2.9802322e-8f, 5.9604645e-8f, 6.1035156e-5f, 6.1035e-5f,
                               1.0f + 1.0f / 2048.0f, 1.0f + 3.0f / 2048.0f, INFINITY, -INFINITY};
  for (int i = 0; i < 400000; ++i) {
    // uniformly random bits over the range where halves are finite or overflow
    const uint32_t u = (rng() & 0x80000000u) | (0x30000000u + rng() % 0x18000000u);
    values.push_back(from_bits(u));
  }
  for (float f : values) {
    const uint16_t got = opk::fp16_bits_rne(f);
    const uint16_t want = std::isinf(f) ? uint16_t((std::signbit(f) ? 0x8000 : 0) | 0x7c00) : reference_half(f);
    CHECK(got == want, "float %08x -> half %04x, want %04x", bits(f), got, want);
#if OPK_X86
    CHECK(got == _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT), "float %08x: F16C disagrees", bits(f));
#endif
  }
}

template <typename T>
std::vector<T> random_row(std::mt19937& rng, int64_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<T> v(static_cast<size_t>(n));
  for (auto& e : v) e = opk::from_float<T>(d(rng));
  return v;
}

// rms_norm: y = x * (1 / sqrt(mean(x^2) + eps)) * gamma, within fp32 rounding of a double
// reference; rstd likewise.
template <typename T>
void test_rms_norm(int64_t rows, int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(n * 31 + rows));
  auto x = random_row<T>(rng, rows * n, 2.0f);
  auto g = random_row<T>(rng, n, 1.0f);
  std::vector<T> y(static_cast<size_t>(rows * n));
  std::vector<float> rstd(static_cast<size_t>(rows));
  opk::generic::rms_norm_rows<T, T>(x.data(), g.data(), y.data(), rstd.data(), rows, n, 1e-6f, false);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += double(opk::to_float(x[r * n + j])) * opk::to_float(x[r * n + j]);
    const double want_rstd = 1.0 / std::sqrt(ss / double(n) + 1e-6);
    CHECK(std::fabs(rstd[r] - want_rstd) <= 1e-5 * want_rstd, "rstd row %" PRId64 ": %g vs %g", r,
          double(rstd[r]), want_rstd);
    for (int64_t j = 0; j < n; ++j) {
      const double want = opk::to_float(x[r * n + j]) * want_rstd * opk::to_float(g[j]);
      const double got = opk::to_float(y[r * n + j]);
      const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-2;
      CHECK(std::fabs(got - want) <= tol * (1.0 + std::fabs(want)), "rms_norm (%" PRId64 ", %" PRId64 "): %g vs %g",
            r, j, got, want);
    }
  }
}

// dynamic quant: scale = amax / 127 and y = rint(x * (127 / amax)), the same fp32
// operations as the contract, so the comparison is exact.
template <typename T>
void test_dynamic_quant(int64_t rows, int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(n * 7 + rows));
  auto x = random_row<T>(rng, rows * n, 3.0f);
  if (rows > 1) for (int64_t j = 0; j < n; ++j) x[size_t(n + j)] = opk::from_float<T>(0.0f);  // a zero row
  std::vector<int8_t> y(static_cast<size_t>(rows * n));
  std::vector<float> scale(static_cast<size_t>(rows));
  opk::generic::dynamic_quant_rows<T, float>(x.data(), nullptr, y.data(), nullptr, scale.data(), rows, n, 127.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float amax = 0.0f;
    for (int64_t j = 0; j < n; ++j) amax = std::max(amax, std::fabs(opk::to_float(x[r * n + j])));
    const float mul = amax > 0.0f ? 127.0f / amax : 0.0f;
    CHECK(scale[r] == amax / 127.0f, "scale row %" PRId64, r);
    for (int64_t j = 0; j < n; ++j) {
      float q = std::nearbyint(opk::to_float(x[r * n + j]) * mul);
      q = std::min(127.0f, std::max(-128.0f, q));
      CHECK(y[r * n + j] == int8_t(q), "dynamic_quant (%" PRId64 ", %" PRId64 "): %d vs %d", r, j,
            int(y[r * n + j]), int(q));
    }
  }
}

// quantize (div mode): round(x / s + zp) saturated to uint8 / int8, NaN -> the low bound.
template <typename O>
void test_quantize(int64_t len) {
  std::mt19937 rng(static_cast<unsigned>(len));
  auto x = random_row<float>(rng, len, 50.0f);
  x[0] = NAN;
  x[1] = 2.5f * 0.1f;  // a tie after division (rounds to even)
  const float lo = std::is_same_v<O, int8_t> ? -128.0f : 0.0f, hi = std::is_same_v<O, int8_t> ? 127.0f : 255.0f;
  std::vector<O> out(static_cast<size_t>(len));
  opk::generic::quantize_run<float, O>(x.data(), 0.1f, 3.0f, true, out.data(), nullptr, len, lo, hi);
  for (int64_t j = 0; j < len; ++j) {
    float v = x[j] / 0.1f + 3.0f;
    v = std::isnan(v) ? 0.0f : std::min(hi, std::max(lo, v));  // a NaN stores 0
    CHECK(out[j] == O(std::nearbyint(v)), "quantize %" PRId64 ": %d vs %g", j, int(out[j]), double(std::nearbyint(v)));
  }
}

#if OPK_X86
// The generic kernels and the AVX2 kernels: the same lane count and reduction trees.
template <typename T>
void test_generic_equals_avx2(int64_t rows, int64_t n) {
  std::mt19937 rng(static_cast<unsigned>(n + 1000 * rows));
  auto x1 = random_row<T>(rng, rows * n, 2.0f), x2 = random_row<T>(rng, rows * n, 2.0f);
  auto g = random_row<T>(rng, n, 1.0f);
  std::vector<T> ya(static_cast<size_t>(rows * n)), yb(static_cast<size_t>(rows * n)), xa(static_cast<size_t>(rows * n)), xb(static_cast<size_t>(rows * n));
  std::vector<float> ra(static_cast<size_t>(rows)), rb(static_cast<size_t>(rows));
  opk::generic::add_rms_norm_rows<T>(x1.data(), x2.data(), g.data(), ya.data(), nullptr, ra.data(), xa.data(), rows, n, 1e-5f, false);
  opk::avx2::add_rms_norm_rows<T>(x1.data(), x2.data(), g.data(), yb.data(), nullptr, rb.data(), xb.data(), rows, n, 1e-5f, false);
  CHECK(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(T)) == 0, "add_rms_norm y differs (n=%" PRId64 ")", n);
  CHECK(std::memcmp(xa.data(), xb.data(), xa.size() * sizeof(T)) == 0, "add_rms_norm x differs (n=%" PRId64 ")", n);
  CHECK(std::memcmp(ra.data(), rb.data(), ra.size() * sizeof(float)) == 0, "add_rms_norm rstd differs (n=%" PRId64 ")", n);
  std::vector<int8_t> qa(static_cast<size_t>(rows * n)), qb(static_cast<size_t>(rows * n));
  std::vector<float> sa(static_cast<size_t>(rows)), sb(static_cast<size_t>(rows));
  opk::generic::dynamic_quant_rows<T, T>(x1.data(), g.data(), qa.data(), nullptr, sa.data(), rows, n, 127.0f);
  opk::avx2::dynamic_quant_rows<T, T>(x1.data(), g.data(), qb.data(), nullptr, sb.data(), rows, n, 127.0f);
  CHECK(qa == qb && sa == sb, "dynamic_quant differs (n=%" PRId64 ")", n);
}
#endif

}  // namespace

int main() {
  test_fp16_conversions();
  for (int64_t n : {1, 7, 8, 16, 33, 257, 1024}) {
    test_rms_norm<float>(3, n);
    test_rms_norm<opk::bf16>(3, n);
    test_rms_norm<opk::fp16>(3, n);
    test_dynamic_quant<float>(3, n);
    test_dynamic_quant<opk::bf16>(3, n);
    test_quantize<int8_t>(n + 2);
    test_quantize<uint8_t>(n + 2);
#if OPK_X86
    test_generic_equals_avx2<float>(4, n);
    test_generic_equals_avx2<opk::bf16>(4, n);
    test_generic_equals_avx2<opk::fp16>(4, n);
#endif
  }
  std::printf("%s: %d failure(s) [%s]\n", failures ? "FAILED" : "ok", failures,
              OPK_X86 ? "x86-64: generic, and generic == avx2" : "portable");
  return failures ? 1 : 0;
}
