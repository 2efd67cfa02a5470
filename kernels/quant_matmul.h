// npu_quant_matmul kernels (torch-free):
//
// * int8_gemm_nt: exact int32 C = A * B^T for int8 A (m, k) and an int8 weight B stored
//   (n, k) row-major -- the layout of a (k, n) weight passed as ``w.t()``, which is how
//   models keep int8 projection weights. Every output is a dot product of two contiguous
//   rows, so the weight is streamed once, straight from where it lies, with no repacking.
//   AVX-512 VNNI (VPDPBUSD: u8 x s8 -> s32) only: A is biased to u8 (a + 128) and the
//   128 * sum(B row) it adds is subtracted per output, so the result is exact.
//   Meant for 1 to 3 rows (decode), where a GEMM library that repacks the weight on each
//   call moves it through memory three times; kernels/quant_matmul_amx.h takes more rows.
// * quant_matmul_epilogue_row: the dequantisation of one int32 row in fp32, in the
//   contract's order: acc * scale, * pertoken, + float bias; stored as fp16 / bf16; or
//   for int8 CANN's requantisation: with an offset (an s9 integer) the value is rounded
//   half to even and saturated to [-256, 255] first, the offset added, then saturated to
//   int8.
#pragma once

#include <algorithm>

#include "simd.h"

#define OPK_KERNEL_BODY "quant_matmul.inl"
#include "isa_expand.h"

namespace opk {

// A run-time property of the CPU: the VNNI kernel exists only where this is true.
// OP_SDK_CPU_ISA=avx2 turns it off like the other AVX-512 paths.
inline bool has_avx512_vnni() {
#if OPK_X86
  static const bool yes = use_avx512() && __builtin_cpu_supports("avx512vnni");
  return yes;
#else
  return false;
#endif
}

// The rows of A re-encoded for VPDPBUSD: u8 (a + 128), each row zero-padded to kpad
// (a multiple of 64) so that the inner loop loads whole vectors of A.
inline int64_t gemm_nt_padded_k(int64_t k) { return (k + 63) / 64 * 64; }
inline void int8_gemm_nt_prepare_a(const int8_t* a, int64_t lda, int64_t m, int64_t k,
                                   uint8_t* au) {
  const int64_t kpad = gemm_nt_padded_k(k);
  for (int64_t i = 0; i < m; ++i) {
    const int8_t* src = a + i * lda;
    uint8_t* dst = au + i * kpad;
    for (int64_t j = 0; j < k; ++j) dst[j] = uint8_t(src[j]) ^ 0x80u;
    std::memset(dst + k, 0, size_t(kpad - k));
  }
}

template <typename O>
void quant_matmul_epilogue_row(const int32_t* acc, const float* scale, bool scale_vec,
                               float pertoken, const float* bias, const float* offset,
                               bool offset_vec, O* out, int64_t n) {
  OPK_ISA_CALL(quant_matmul_epilogue_row, acc, scale, scale_vec, pertoken, bias, offset,
               offset_vec, out, n);
}

}  // namespace opk

// ---------------------------------------------------------------------------------------
#if OPK_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
namespace opk {
namespace vnni {

// The lane sums of four vectors, as one vector [sum(v0), sum(v1), sum(v2), sum(v3)]:
// a transposing add tree (12 instructions instead of 4 separate reductions).
inline __m128i reduce4(const __m512i* v) {
  const __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]),
                                       _mm512_unpackhi_epi32(v[0], v[1]));
  const __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]),
                                       _mm512_unpackhi_epi32(v[2], v[3]));
  // each 128-bit lane now holds partial sums of [v0, v1, v2, v3]
  const __m512i q = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23),
                                     _mm512_unpackhi_epi64(t01, t23));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(q), _mm512_extracti64x4_epi64(q, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// R rows of B against MB rows of A: R * MB dot-product accumulators (16 s32 lanes each)
// plus R accumulators of the B row sums, all in registers; the k loop reads each B row
// once per call. Tails of k are masked loads (zeros contribute nothing).
template <int R, int MB>
inline void block(const uint8_t* au, int64_t kpad, const int8_t* b, int64_t ldb, int64_t k,
                  int32_t* c, int64_t ldc) {
  __m512i acc[MB][R];
  __m512i bsum[R];
  for (int r = 0; r < R; ++r) {
    bsum[r] = _mm512_setzero_si512();
    for (int i = 0; i < MB; ++i) acc[i][r] = _mm512_setzero_si512();
  }
  const __m512i ones = _mm512_set1_epi8(1);
  // One k step, written out twice (whole and masked) rather than as a lambda: gcc 12 keeps
  // arrays a lambda captures by reference in memory, storing every accumulator at each
  // step (m = 1, 7168 x 2048: 285 us against ATen's 170 us on AMD Zen 5).
#define OPK_VNNI_STEP(LOAD)                                                            \
  {                                                                                    \
    __m512i bv[R];                                                                     \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {                              \
      const int8_t* p = b + r * ldb + kk;                                              \
      bv[r] = LOAD;                                                                    \
      bsum[r] = _mm512_dpbusd_epi32(bsum[r], ones, bv[r]);                             \
    }                                                                                  \
    _Pragma("GCC unroll 4") for (int i = 0; i < MB; ++i) {                             \
      const __m512i av = _mm512_loadu_si512(au + i * kpad + kk);                       \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r)                              \
        acc[i][r] = _mm512_dpbusd_epi32(acc[i][r], av, bv[r]);                         \
    }                                                                                  \
  }
  int64_t kk = 0;
  for (; kk + 64 <= k; kk += 64) OPK_VNNI_STEP(_mm512_loadu_si512(p))
  if (kk < k) {
    const __mmask64 mask = (~__mmask64(0)) >> (64 - (k - kk));
    OPK_VNNI_STEP(_mm512_maskz_loadu_epi8(mask, p))
  }
#undef OPK_VNNI_STEP
  // sum((a + 128) * b) - 128 * sum(b), in wrapping 32-bit arithmetic like the GEMM
  if constexpr (R == 4) {
    const __m128i corr = _mm_slli_epi32(reduce4(bsum), 7);
    for (int i = 0; i < MB; ++i)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(c + i * ldc),
                       _mm_sub_epi32(reduce4(acc[i]), corr));
  } else {
    for (int r = 0; r < R; ++r) {
      const uint32_t corr = uint32_t(_mm512_reduce_add_epi32(bsum[r])) << 7;
      for (int i = 0; i < MB; ++i)
        c[i * ldc + r] = int32_t(uint32_t(_mm512_reduce_add_epi32(acc[i][r])) - corr);
    }
  }
}

template <int MB>
inline void rows_of_b(const uint8_t* au, int64_t kpad, const int8_t* b, int64_t ldb,
                      int64_t k, int64_t j0, int64_t j1, int32_t* c, int64_t ldc) {
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) block<4, MB>(au, kpad, b + j * ldb, ldb, k, c + j, ldc);
  for (; j < j1; ++j) block<1, MB>(au, kpad, b + j * ldb, ldb, k, c + j, ldc);
}

// C[i, j] for i < m and j in [j0, j1), from the prepared A (au, m rows of kpad bytes) and
// B rows b + j * ldb (k bytes each). C rows are ldc apart.
inline void int8_gemm_nt(const uint8_t* au, int64_t m, const int8_t* b, int64_t ldb, int64_t k,
                         int64_t j0, int64_t j1, int32_t* c, int64_t ldc) {
  const int64_t kpad = gemm_nt_padded_k(k);
  // Column panels small enough to stay in L1 while every 4-row group of A passes over them.
  const int64_t panel = std::max<int64_t>(4, (16384 / std::max<int64_t>(k, 1)) / 4 * 4);
  for (int64_t p0 = j0; p0 < j1; p0 += panel) {
    const int64_t p1 = std::min(j1, p0 + panel);
    int64_t i = 0;
    for (; i + 4 <= m; i += 4)
      rows_of_b<4>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc);
    switch (m - i) {
      case 3: rows_of_b<3>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 2: rows_of_b<2>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 1: rows_of_b<1>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      default: break;
    }
  }
}

}  // namespace vnni
}  // namespace opk
#pragma GCC pop_options
#endif  // OPK_X86
