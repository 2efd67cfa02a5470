// Torch-free SIMD layer of the CPU kernels: storage types, exact fp16/bf16 <-> fp32
// conversions, and one small float-vector API per instruction set.
//
// Each kernel header compiles its body once per instruction set through
// kernels/isa_expand.h: in namespace opk::generic (portable C++, 8 float lanes held in an
// array, the only one on non-x86 hosts such as Kunpeng aarch64), and on x86-64 also in
// opk::avx2 with the baseline flags (x86-64-v3: AVX2 + FMA + F16C, see setup.py) and in
// opk::avx512 under `#pragma GCC target` (AVX-512 F/BW/VL/DQ). The public wrappers pick
// one at run time (OPK_ISA_CALL), so the same .so uses 512-bit vectors where the CPU has
// them. GCC's auto-vectoriser does not do this job: it keeps 256-bit vectors even in
// AVX-512 clones and does not vectorise _Float16 conversions.
//
// Every kernel is written against the same names in every namespace:
//   Vec (float lanes, Vec::N of them), Full (tag: a whole vector), load / store for
//   float, bf16, fp16 with a Full or partial (int count, zero-filled) tail, arithmetic
//   operators, fma / abs / max / min, round_clamp (clamp to [lo, hi], a NaN lane taking
//   lo, then round half to even, in float lanes), reduce_add / reduce_max, absmax /
//   reduce_absmax (max |x| that propagates NaN), store_q (round half to even, saturated
//   to an integer type; a NaN lane stores 0, the contract's rule for quantised stores),
//   store_fence, round_fp16 / round_bf16 (a lane rounded as a store to that type rounds it,
//   and back), exp2i (2^n of integer lanes) / select_nan (exp's building blocks, see
//   kernels/swiglu.inl), for_each_vec (the loop with its tail). generic and avx2 have the same lane count and the same reduction trees, so
//   their results are bit-identical.
#pragma once

#if defined(__x86_64__) || defined(_M_X64)
#define OPK_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define OPK_X86 0
#endif

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>

namespace opk {

// Storage types, bit-compatible with c10::BFloat16 and c10::Half.
struct bf16 {
  uint16_t bits;
};
struct fp16 {
  uint16_t bits;
};

inline float to_float(float v) { return v; }
inline float to_float(bf16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 <-> binary32 in plain C++ (the same results as F16C's VCVTPH2PS /
// VCVTPS2PH with round-to-nearest-even: NaNs are quieted and keep their upper payload).
inline float fp16_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man != 0 ? 0x400000u : 0u) | (man << 13);
  } else if (exp != 0) {
    u = sign | ((exp + 112) << 23) | (man << 13);
  } else {
    const float f = float(man) * 5.9604644775390625e-8f;  // man * 2^-24, exact
    std::memcpy(&u, &f, 4);
    u |= sign;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t fp16_bits_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN
  if (a >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // >= 65520 rounds to infinity
  if (a < 0x38800000u) {
    // below 2^-14: a subnormal half. Adding 0.5 (whose ulp is 2^-24) rounds the value to
    // a multiple of 2^-24, half to even, in the FPU; the low mantissa bits are the result.
    float af;
    std::memcpy(&af, &a, 4);
    const float r = af + 0.5f;
    uint32_t ru;
    std::memcpy(&ru, &r, 4);
    return uint16_t(sign | (ru - 0x3f000000u));
  }
  a += 0xc8000fffu + ((a >> 13) & 1u);  // re-bias the exponent (-112 << 23) and round
  return uint16_t(sign | (a >> 13));
}

#if OPK_X86
inline float to_float(fp16 v) { return _cvtsh_ss(v.bits); }
#else
inline float to_float(fp16 v) { return fp16_bits_to_float(v.bits); }
#endif

// Round to nearest even, NaN -> canonical quiet NaN (the same bits as c10::BFloat16).
inline uint16_t bf16_bits_rne(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

template <typename T>
inline T from_float(float f);
template <>
inline float from_float<float>(float f) { return f; }
template <>
inline bf16 from_float<bf16>(float f) { return bf16{bf16_bits_rne(f)}; }
template <>
inline fp16 from_float<fp16>(float f) {
#if OPK_X86
  return fp16{uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT))};
#else
  return fp16{fp16_bits_rne(f)};
#endif
}

// Run-time choice of the instruction set: the best the CPU has, or the one named by
// OP_SDK_CPU_ISA (generic, avx2, avx2_vnni, avx512; a name the CPU or the build cannot run
// falls back to the best that can, avx2_vnni to avx2). The tests use it to check every path
// on one machine. avx2_vnni is avx2 plus the AVX-VNNI int8 GEMMs (kernels/quant_matmul_avx2.h):
// every other kernel runs its avx2 body there.
enum class Isa { generic = 0, avx2 = 1, avx2_vnni = 2, avx512 = 3 };
#if OPK_X86
// AVX-VNNI (VEX VPDPBUSD): CPUID.(EAX=7, ECX=1):EAX bit 4 (GCC 12's __builtin_cpu_supports
// does not report it).
inline bool cpu_has_avx_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d) == 0) return false;
  return ((a >> 4) & 1u) != 0 && __builtin_cpu_supports("avx2");
}
#endif
inline Isa detect_isa() {
#if OPK_X86
  __builtin_cpu_init();
  const bool vnni = cpu_has_avx_vnni();
  const Isa best = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
                       ? Isa::avx512
                   : vnni ? Isa::avx2_vnni
                          : Isa::avx2;
#else
  const bool vnni = false;
  const Isa best = Isa::generic;
#endif
  const char* env = std::getenv("OP_SDK_CPU_ISA");
  if (env == nullptr) return best;
  if (std::strcmp(env, "generic") == 0) return Isa::generic;
  if (std::strcmp(env, "avx2") == 0 && best >= Isa::avx2) return Isa::avx2;
  if (std::strcmp(env, "avx2_vnni") == 0 && best >= Isa::avx2)
    return vnni ? Isa::avx2_vnni : Isa::avx2;
  return best;
}
inline Isa isa() {
  static const Isa v = detect_isa();
  return v;
}
inline bool use_avx512() { return isa() == Isa::avx512; }
// the AVX-VNNI int8 GEMMs: where the CPU has AVX-VNNI and no AVX-512 path is in use
inline bool use_avx_vnni() { return isa() == Isa::avx2_vnni; }
inline const char* isa_name() {
  switch (isa()) {
    case Isa::avx512: return "avx512";
    case Isa::avx2_vnni: return "avx2_vnni";
    case Isa::avx2: return "avx2";
    default: return "generic";
  }
}

// Calls fn from the namespace of the instruction set in use (avx2_vnni: the avx2 body).
#if OPK_X86
#define OPK_ISA_CALL(fn, ...)                                                \
  (::opk::isa() == ::opk::Isa::avx512 ? ::opk::avx512::fn(__VA_ARGS__)      \
   : ::opk::isa() >= ::opk::Isa::avx2 ? ::opk::avx2::fn(__VA_ARGS__)        \
                                      : ::opk::generic::fn(__VA_ARGS__))
#else
#define OPK_ISA_CALL(fn, ...) (::opk::generic::fn(__VA_ARGS__))
#endif

// A per-thread fp32 row (and int8 row) scratch buffer, 64-byte aligned, so a row is read
// and converted once and the later passes run from L1 / L2.
template <typename E>
struct RowBuffer {
  E* data = nullptr;
  explicit RowBuffer(int64_t n) {
    size_t bytes = (size_t(n > 0 ? n : 1) * sizeof(E) + 63) / 64 * 64;
    data = static_cast<E*>(std::aligned_alloc(64, bytes));
    if (data == nullptr) throw std::bad_alloc();
  }
  ~RowBuffer() { std::free(data); }
  RowBuffer(const RowBuffer&) = delete;
  RowBuffer& operator=(const RowBuffer&) = delete;
};

// Calls f(std::bool_constant<b>{}...) so that flags known per call become compile-time
// constants of the inner loops (no branches on absent optional inputs per element).
template <typename F>
inline decltype(auto) with_flags(F&& f) {
  return f();
}
template <typename F, typename... Rest>
inline decltype(auto) with_flags(F&& f, bool b, Rest... rest) {
  if (b) {
    return with_flags(
        [&](auto... c) -> decltype(auto) { return f(std::true_type{}, c...); }, rest...);
  }
  return with_flags(
      [&](auto... c) -> decltype(auto) { return f(std::false_type{}, c...); }, rest...);
}

// Pulls the next row's lines toward L1 while the current row is in its compute-only
// passes, so the memory system is not idle between the reading passes of two rows.
template <typename T>
inline void prefetch_row_part(const T* next_row, int64_t j) {
  __builtin_prefetch(next_row + j, 0, 3);
}

// The row loop with its tail, for a vector of N lanes: f(j, FullTag{}) on whole vectors,
// then f(j, count) once on the rest. Each instruction set's for_each_vec forwards here.
template <int N, typename FullTag, typename F>
inline void for_each_lane_block(int64_t n, F&& f) {
  int64_t j = 0;
  for (; j + N <= n; j += N) f(j, FullTag{});
  if (j < n) f(j, int(n - j));
}

// Pack int4 values (int8 holding [-8, 7]) 8 per int32, element 0 in the lowest nibble.
// n must be a multiple of 8. Bytes are loaded little-endian, so byte k's low nibble is
// moved to bits 4k..4k+3 by three shift / or / mask steps.
inline void pack_int4_row(const int8_t* q, int32_t* out, int64_t n) {
  for (int64_t w = 0; w < n / 8; ++w) {
    uint64_t x;
    std::memcpy(&x, q + 8 * w, 8);
    x &= 0x0F0F0F0F0F0F0F0FULL;
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFULL;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFULL;
    x = (x | (x >> 16)) & 0x00000000FFFFFFFFULL;
    out[w] = int32_t(uint32_t(x));
  }
}

// The larger of two non-negative floats (|x| values), NaN propagating: as unsigned
// integers their bits order them, and every NaN's bits lie above +inf's. Exact and
// associative, so every lane count and reduction tree gives the same value (the per-row
// max of the dynamic quantisations: a row with a NaN has a NaN max, as the reference's).
inline float absmax1(float a, float b) {
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  return ua >= ub ? a : b;
}

}  // namespace opk

// ---------------------------------------------------------------------------------------
// Portable C++: 8 float lanes in an array (GCC vectorises the lane loops for the target:
// NEON on aarch64). The same lane count and reduction trees as avx2, and the same rules
// at the edges (max / min return the second operand when either is NaN, as MAXPS does;
// quantised stores clamp, round half to even and saturate), so the two agree bit for bit.
namespace opk {
namespace generic {

struct Full {};

struct Vec {
  static constexpr int N = 8;
  float v[8];
};

template <typename F>
inline Vec map(F&& f) {
  Vec r;
  for (int i = 0; i < Vec::N; ++i) r.v[i] = f(i);
  return r;
}
inline Vec zero() { return map([](int) { return 0.0f; }); }
inline Vec set1(float f) { return map([f](int) { return f; }); }
inline Vec operator+(Vec a, Vec b) { return map([&](int i) { return a.v[i] + b.v[i]; }); }
inline Vec operator-(Vec a, Vec b) { return map([&](int i) { return a.v[i] - b.v[i]; }); }
inline Vec operator*(Vec a, Vec b) { return map([&](int i) { return a.v[i] * b.v[i]; }); }
inline Vec operator/(Vec a, Vec b) { return map([&](int i) { return a.v[i] / b.v[i]; }); }
inline Vec fma(Vec a, Vec b, Vec c) {
  return map([&](int i) { return std::fma(a.v[i], b.v[i], c.v[i]); });
}
inline float abs1(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u &= 0x7fffffffu;
  std::memcpy(&x, &u, 4);
  return x;
}
inline float max1(float a, float b) { return a > b ? a : b; }
inline float min1(float a, float b) { return a < b ? a : b; }
inline Vec abs(Vec a) { return map([&](int i) { return abs1(a.v[i]); }); }
inline Vec max(Vec a, Vec b) { return map([&](int i) { return max1(a.v[i], b.v[i]); }); }
inline Vec min(Vec a, Vec b) { return map([&](int i) { return min1(a.v[i], b.v[i]); }); }
// max(m, |v|) per lane, NaN propagating (absmax1)
inline Vec absmax(Vec m, Vec v) { return map([&](int i) { return absmax1(m.v[i], abs1(v.v[i])); }); }
inline float reduce_absmax(Vec a) {
  float r = a.v[0];
  for (int i = 1; i < Vec::N; ++i) r = absmax1(r, a.v[i]);
  return r;
}
// clamp to [lo, hi] (a NaN lane takes lo), round half to even
inline float round_clamp(float a, float lo, float hi) {
  return __builtin_roundevenf(min1(max1(a, lo), hi));
}
inline Vec round_clamp(Vec a, Vec lo, Vec hi) {
  return map([&](int i) { return round_clamp(a.v[i], lo.v[i], hi.v[i]); });
}

// avx2's tree: lanes i and i + 4, then i and i + 2, then 0 and 1
inline float reduce_add(Vec a) {
  float s[4];
  for (int i = 0; i < 4; ++i) s[i] = a.v[i] + a.v[i + 4];
  const float s0 = s[0] + s[2], s1 = s[1] + s[3];
  return s0 + s1;
}
inline float reduce_max(Vec a) {
  float s[4];
  for (int i = 0; i < 4; ++i) s[i] = max1(a.v[i], a.v[i + 4]);
  const float s0 = max1(s[0], s[2]), s1 = max1(s[1], s[3]);
  return max1(s0, s1);
}

template <typename T>
inline Vec load(const T* p, Full) {
  return map([&](int i) { return to_float(p[i]); });
}
inline Vec load(const int32_t* p, Full) {
  return map([&](int i) { return static_cast<float>(p[i]); });
}
template <typename T>
inline Vec load(const T* p, int n) {
  alignas(32) T tmp[Vec::N];
  std::memset(tmp, 0, sizeof(tmp));
  std::memcpy(tmp, p, sizeof(T) * size_t(n));
  return load(tmp, Full{});
}

template <typename T>
inline void store(T* p, Vec a, Full) {
  for (int i = 0; i < Vec::N; ++i) p[i] = from_float<T>(a.v[i]);
}
template <typename T>
inline void store(T* p, Vec a, int n) {
  for (int i = 0; i < n; ++i) p[i] = from_float<T>(a.v[i]);
}
// No non-temporal stores in portable C++: plain stores, and nothing to fence.
template <typename T>
inline void store_stream(T* p, Vec a) {
  store(p, a, Full{});
}
inline void store_fence() {}

template <typename O>
inline O saturate(float r) {
  if constexpr (std::is_same_v<O, int32_t>) {
    return int32_t(r);
  } else {
    constexpr float lo = std::is_same_v<O, int8_t> ? -128.0f : 0.0f;
    constexpr float hi = std::is_same_v<O, int8_t> ? 127.0f : 255.0f;
    return O(r < lo ? lo : (r > hi ? hi : r));
  }
}
template <typename O>
inline O quantise1(float a, float lo, float hi) {
  if (a != a) return O(0);  // NaN stores 0
  if constexpr (std::is_same_v<O, int32_t>) {
    // 2^31 - 1 is not an fp32 value; values >= 2^31 saturate
    if (a >= 2147483648.0f) return 0x7fffffff;
    return int32_t(round_clamp(a, lo, 2147483520.0f));
  } else {
    return saturate<O>(round_clamp(a, lo, hi));
  }
}
template <typename O>
inline void store_q(O* p, Vec a, Vec lo, Vec hi, Full) {
  for (int i = 0; i < Vec::N; ++i) p[i] = quantise1<O>(a.v[i], lo.v[i], hi.v[i]);
}
template <typename O>
inline void store_q(O* p, Vec a, Vec lo, Vec hi, int n) {
  for (int i = 0; i < n; ++i) p[i] = quantise1<O>(a.v[i], lo.v[i], hi.v[i]);
}
inline void store_q_stream(int8_t* p, Vec a, Vec lo, Vec hi) { store_q(p, a, lo, hi, Full{}); }

// The row loop with its tail (opk::for_each_lane_block).
// 2^n for integer-valued lanes n in [-126, 127] (exp's scaling: built from the exponent bits)
inline Vec exp2i(Vec n) {
  return map([&](int i) {
    const uint32_t u = uint32_t(int32_t(n.v[i]) + 127) << 23;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  });
}
// lanes where x is NaN take x, the others y
inline Vec select_nan(Vec x, Vec y) { return map([&](int i) { return x.v[i] != x.v[i] ? x.v[i] : y.v[i]; }); }
// Each lane rounded to float16 (half to even; overflow to inf, NaN kept) and back.
inline Vec round_fp16(Vec a) {
  return map([&](int i) { return fp16_bits_to_float(fp16_bits_rne(a.v[i])); });
}
// Each lane rounded to bfloat16 (a store's rounding: half to even, NaN canonical) and back.
inline Vec round_bf16(Vec a) {
  return map([&](int i) { return to_float(bf16{bf16_bits_rne(a.v[i])}); });
}

template <typename F>
inline void for_each_vec(int64_t n, F&& f) {
  for_each_lane_block<Vec::N, Full>(n, f);
}

}  // namespace generic
}  // namespace opk

#if OPK_X86
// ---------------------------------------------------------------------------------------
// AVX2 + FMA + F16C: 8 float lanes (the baseline of the build).
namespace opk {
namespace avx2 {

struct Full {};

struct Vec {
  static constexpr int N = 8;
  __m256 v;
};

inline Vec zero() { return {_mm256_setzero_ps()}; }
inline Vec set1(float f) { return {_mm256_set1_ps(f)}; }
inline Vec operator+(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline Vec operator/(Vec a, Vec b) { return {_mm256_div_ps(a.v, b.v)}; }
inline Vec fma(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec abs(Vec a) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)}; }
inline Vec max(Vec a, Vec b) { return {_mm256_max_ps(a.v, b.v)}; }
inline Vec min(Vec a, Vec b) { return {_mm256_min_ps(a.v, b.v)}; }
inline Vec round_clamp(Vec a, Vec lo, Vec hi) {  // a NaN lane takes lo (maxps: 2nd operand)
  return {_mm256_round_ps(_mm256_min_ps(_mm256_max_ps(a.v, lo.v), hi.v),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}

inline float reduce_add(Vec a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float reduce_max(Vec a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// max(m, |v|) per lane, NaN propagating: unsigned max of the bits (opk::absmax1)
inline Vec absmax(Vec m, Vec v) {
  return {_mm256_castsi256_ps(
      _mm256_max_epu32(_mm256_castps_si256(m.v), _mm256_castps_si256(abs(v).v)))};
}
inline float reduce_absmax(Vec a) {
  __m128i s = _mm_max_epu32(_mm256_castsi256_si128(_mm256_castps_si256(a.v)),
                            _mm256_extracti128_si256(_mm256_castps_si256(a.v), 1));
  s = _mm_max_epu32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_max_epu32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtss_f32(_mm_castsi128_ps(s));
}

// ---- loads: a full vector, or the first n (< N) elements with the rest zero
inline Vec load(const float* p, Full) { return {_mm256_loadu_ps(p)}; }
inline Vec bf16x8_to_vec(__m128i h) {
  return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))};
}
inline Vec load(const bf16* p, Full) {
  return bf16x8_to_vec(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline Vec load(const fp16* p, Full) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
// int32 -> fp32, rounded to nearest even (static_cast<float>'s rounding)
inline Vec load(const int32_t* p, Full) {
  return {_mm256_cvtepi32_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
template <typename T>
inline Vec load(const T* p, int n) {
  alignas(32) T tmp[Vec::N];
  std::memset(tmp, 0, sizeof(tmp));
  std::memcpy(tmp, p, sizeof(T) * size_t(n));
  return load(tmp, Full{});
}

// ---- stores, rounding to nearest even
inline void store(float* p, Vec a, Full) { _mm256_storeu_ps(p, a.v); }
// bf16 bits (round to nearest even, NaN canonical) in the low half of each 32-bit lane
inline __m256i bf16_lanes(Vec a) {
  __m256i u = _mm256_castps_si256(a.v);
  __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  r = _mm256_srli_epi32(r, 16);
  __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7fc0), nan);
}
inline __m128i vec_to_bf16x8(Vec a) {
  __m256i r = bf16_lanes(a);
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}
// Each lane rounded to bfloat16 (a store's rounding) and back.
inline Vec round_bf16(Vec a) { return {_mm256_castsi256_ps(_mm256_slli_epi32(bf16_lanes(a), 16))}; }
inline void store(bf16* p, Vec a, Full) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), vec_to_bf16x8(a));
}
inline void store(fp16* p, Vec a, Full) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT));
}
// Each lane rounded to float16 (half to even; overflow to inf, NaN kept) and back.
inline Vec round_fp16(Vec a) {
  return {_mm256_cvtph_ps(_mm256_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT))};
}
template <typename T>
inline void store(T* p, Vec a, int n) {
  alignas(32) T tmp[Vec::N];
  store(tmp, a, Full{});
  std::memcpy(p, tmp, sizeof(T) * size_t(n));
}

// Non-temporal stores of a whole vector to an address aligned to its size: for outputs
// far larger than the caches, on memory that is already mapped (no read-for-ownership).
inline void store_stream(float* p, Vec a) { _mm256_stream_ps(p, a.v); }
inline void store_stream(bf16* p, Vec a) {
  _mm_stream_si128(reinterpret_cast<__m128i*>(p), vec_to_bf16x8(a));
}
inline void store_stream(fp16* p, Vec a) {
  _mm_stream_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT));
}

inline void store_fence() { _mm_sfence(); }

// ---- quantised stores: round half to even, saturate to [lo, hi] (integers in fp32)
// (a NaN lane gives 0: round_clamp's lo, masked off by the ordered compare)
inline __m256i round_clamp_epi32(Vec a, Vec lo, Vec hi) {
  const __m256 ord = _mm256_cmp_ps(a.v, a.v, _CMP_ORD_Q);
  // whole numbers: exact conversion
  return _mm256_cvtps_epi32(_mm256_and_ps(round_clamp(a, lo, hi).v, ord));
}
inline void store_q(int8_t* p, Vec a, Vec lo, Vec hi, Full) {
  __m256i i = round_clamp_epi32(a, lo, hi);
  __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packs_epi16(w, w));
}
inline void store_q_stream(int8_t* p, Vec a, Vec lo, Vec hi) {
  __m256i i = round_clamp_epi32(a, lo, hi);
  __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_stream_si64(reinterpret_cast<long long*>(p), _mm_cvtsi128_si64(_mm_packs_epi16(w, w)));
}
inline void store_q(uint8_t* p, Vec a, Vec lo, Vec hi, Full) {
  __m256i i = round_clamp_epi32(a, lo, hi);
  __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm_packus_epi16(w, w));
}
// int32: 2^31 - 1 is not an fp32 value; lanes >= 2^31 saturate through a blend.
inline void store_q(int32_t* p, Vec a, Vec lo, Vec hi, Full) {
  (void)hi;
  __m256 big = _mm256_cmp_ps(a.v, _mm256_set1_ps(2147483648.0f), _CMP_GE_OQ);
  __m256i i = round_clamp_epi32(a, lo, set1(2147483520.0f));
  i = _mm256_blendv_epi8(i, _mm256_set1_epi32(0x7fffffff), _mm256_castps_si256(big));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), i);
}
template <typename O>
inline void store_q(O* p, Vec a, Vec lo, Vec hi, int n) {
  alignas(32) O tmp[Vec::N];
  store_q(tmp, a, lo, hi, Full{});
  std::memcpy(p, tmp, sizeof(O) * size_t(n));
}

// The row loop with its tail (opk::for_each_lane_block).
inline Vec exp2i(Vec n) {
  const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n.v), _mm256_set1_epi32(127));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(e, 23))};
}
inline Vec select_nan(Vec x, Vec y) {
  return {_mm256_blendv_ps(y.v, x.v, _mm256_cmp_ps(x.v, x.v, _CMP_UNORD_Q))};
}

template <typename F>
inline void for_each_vec(int64_t n, F&& f) {
  for_each_lane_block<Vec::N, Full>(n, f);
}

}  // namespace avx2
}  // namespace opk

// ---------------------------------------------------------------------------------------
// AVX-512 F/BW/VL/DQ: 16 float lanes, masked tails.
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
namespace opk {
namespace avx512 {

struct Full {};

struct Vec {
  static constexpr int N = 16;
  __m512 v;
};

inline __mmask16 tail_mask(int n) { return __mmask16((1u << n) - 1u); }

inline Vec zero() { return {_mm512_setzero_ps()}; }
inline Vec set1(float f) { return {_mm512_set1_ps(f)}; }
inline Vec operator+(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline Vec operator/(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
inline Vec fma(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec abs(Vec a) { return {_mm512_abs_ps(a.v)}; }
inline Vec max(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
inline Vec min(Vec a, Vec b) { return {_mm512_min_ps(a.v, b.v)}; }
inline Vec round_clamp(Vec a, Vec lo, Vec hi) {
  return {_mm512_roundscale_ps(_mm512_min_ps(_mm512_max_ps(a.v, lo.v), hi.v),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline float reduce_add(Vec a) { return _mm512_reduce_add_ps(a.v); }
inline float reduce_max(Vec a) { return _mm512_reduce_max_ps(a.v); }
// max(m, |v|) per lane, NaN propagating: unsigned max of the bits (opk::absmax1)
inline Vec absmax(Vec m, Vec v) {
  return {_mm512_castsi512_ps(
      _mm512_max_epu32(_mm512_castps_si512(m.v), _mm512_castps_si512(abs(v).v)))};
}
inline float reduce_absmax(Vec a) {
  const uint32_t u = _mm512_reduce_max_epu32(_mm512_castps_si512(a.v));
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline Vec bf16x16_to_vec(__m256i h) {
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline Vec load(const float* p, Full) { return {_mm512_loadu_ps(p)}; }
inline Vec load(const float* p, int n) { return {_mm512_maskz_loadu_ps(tail_mask(n), p)}; }
inline Vec load(const bf16* p, Full) {
  return bf16x16_to_vec(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline Vec load(const bf16* p, int n) {
  return bf16x16_to_vec(_mm256_maskz_loadu_epi16(tail_mask(n), p));
}
inline Vec load(const fp16* p, Full) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
inline Vec load(const fp16* p, int n) {
  return {_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), p))};
}
inline Vec load(const int32_t* p, Full) { return {_mm512_cvtepi32_ps(_mm512_loadu_si512(p))}; }
inline Vec load(const int32_t* p, int n) {
  return {_mm512_cvtepi32_ps(_mm512_maskz_loadu_epi32(tail_mask(n), p))};
}

inline void store(float* p, Vec a, Full) { _mm512_storeu_ps(p, a.v); }
inline void store(float* p, Vec a, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), a.v); }
// Integer RNE instead of VCVTNEPS2BF16: that instruction flushes denormals, c10 does not.
// bf16 bits (round to nearest even, NaN canonical) in the low half of each 32-bit lane
inline __m512i bf16_lanes(Vec a) {
  __m512i u = _mm512_castps_si512(a.v);
  __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff)));
  r = _mm512_srli_epi32(r, 16);
  __mmask16 nan = _mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q);
  return _mm512_mask_blend_epi32(nan, r, _mm512_set1_epi32(0x7fc0));
}
inline __m256i vec_to_bf16x16(Vec a) { return _mm512_cvtepi32_epi16(bf16_lanes(a)); }
// Each lane rounded to bfloat16 (a store's rounding) and back.
inline Vec round_bf16(Vec a) { return {_mm512_castsi512_ps(_mm512_slli_epi32(bf16_lanes(a), 16))}; }
inline void store(bf16* p, Vec a, Full) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), vec_to_bf16x16(a));
}
inline void store(bf16* p, Vec a, int n) {
  _mm256_mask_storeu_epi16(p, tail_mask(n), vec_to_bf16x16(a));
}
inline void store(fp16* p, Vec a, Full) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
// Each lane rounded to float16 (half to even; overflow to inf, NaN kept) and back.
inline Vec round_fp16(Vec a) {
  return {_mm512_cvtph_ps(_mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC))};
}
inline void store(fp16* p, Vec a, int n) {
  _mm256_mask_storeu_epi16(p, tail_mask(n),
                           _mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
inline void store_stream(float* p, Vec a) { _mm512_stream_ps(p, a.v); }
inline void store_stream(bf16* p, Vec a) {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p), vec_to_bf16x16(a));
}
inline void store_stream(fp16* p, Vec a) {
  _mm256_stream_si256(reinterpret_cast<__m256i*>(p),
                      _mm512_cvtps_ph(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

inline void store_fence() { _mm_sfence(); }

// (a NaN lane gives 0: the ordered compare's zero mask)
inline __m512i round_clamp_epi32(Vec a, Vec lo, Vec hi) {
  const __mmask16 ord = _mm512_cmp_ps_mask(a.v, a.v, _CMP_ORD_Q);
  __m512 c = _mm512_min_ps(_mm512_max_ps(a.v, lo.v), hi.v);
  return _mm512_maskz_cvt_roundps_epi32(ord, c, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
inline void store_q(int8_t* p, Vec a, Vec lo, Vec hi, Full) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm512_cvtsepi32_epi8(round_clamp_epi32(a, lo, hi)));
}
inline void store_q(int8_t* p, Vec a, Vec lo, Vec hi, int n) {
  _mm512_mask_cvtsepi32_storeu_epi8(p, tail_mask(n), round_clamp_epi32(a, lo, hi));
}
inline void store_q_stream(int8_t* p, Vec a, Vec lo, Vec hi) {
  _mm_stream_si128(reinterpret_cast<__m128i*>(p),
                   _mm512_cvtsepi32_epi8(round_clamp_epi32(a, lo, hi)));
}
inline void store_q(uint8_t* p, Vec a, Vec lo, Vec hi, Full) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm512_cvtusepi32_epi8(round_clamp_epi32(a, lo, hi)));
}
inline void store_q(uint8_t* p, Vec a, Vec lo, Vec hi, int n) {
  _mm512_mask_cvtusepi32_storeu_epi8(p, tail_mask(n), round_clamp_epi32(a, lo, hi));
}
// int32: 2^31 - 1 is not an fp32 value; lanes >= 2^31 saturate through a mask.
inline __m512i round_sat_i32(Vec a, Vec lo) {
  __mmask16 big = _mm512_cmp_ps_mask(a.v, _mm512_set1_ps(2147483648.0f), _CMP_GE_OQ);
  __m512i i = round_clamp_epi32(a, lo, set1(2147483520.0f));
  return _mm512_mask_blend_epi32(big, i, _mm512_set1_epi32(0x7fffffff));
}
inline void store_q(int32_t* p, Vec a, Vec lo, Vec, Full) {
  _mm512_storeu_si512(p, round_sat_i32(a, lo));
}
inline void store_q(int32_t* p, Vec a, Vec lo, Vec, int n) {
  _mm512_mask_storeu_epi32(p, tail_mask(n), round_sat_i32(a, lo));
}

// The row loop with its tail, written out here rather than forwarded to
// opk::for_each_lane_block: that template is compiled outside this target region, and gcc
// does not inline an AVX-512 function (f) into a function with fewer target features, so
// every vector became a call (npu_dynamic_quant, bf16 4096 x 4096 on AMD Zen 5: 2.8 ms,
// twice its AVX2 body's time).
inline Vec exp2i(Vec n) {
  const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(e, 23))};
}
inline Vec select_nan(Vec x, Vec y) {
  return {_mm512_mask_mov_ps(y.v, _mm512_cmp_ps_mask(x.v, x.v, _CMP_UNORD_Q), x.v)};
}

template <typename F>
inline void for_each_vec(int64_t n, F&& f) {
  int64_t j = 0;
  for (; j + Vec::N <= n; j += Vec::N) f(j, Full{});
  if (j < n) f(j, int(n - j));
}

}  // namespace avx512
}  // namespace opk
#pragma GCC pop_options
#endif  // OPK_X86
