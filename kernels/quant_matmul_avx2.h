// The int8 GEMMs of npu_quant_matmul for x86-64 CPUs without AVX-512 (the AVX2 baseline
// of the build), exact int32 C = A * B^T like kernels/quant_matmul.h's AVX-512 VNNI ones:
//
// * opk::avx2mm: plain AVX2. Both operands are sign-extended to int16 and multiplied with
//   VPMADDWD (s16 x s16 -> s32, two products summed per lane: at most 2 * 2^14, never
//   saturates), then added in wrapping int32 -- the exact products, summed in int32 like
//   the reference. (VPMADDUBSW, u8 x s8 -> s16, would saturate: 255 * 127 * 2 > 2^15.)
//   A is prepared once as int16 rows of kpad values; each 16 (in place) or 32 (packed)
//   bytes of the weight are sign-extended once per group of A rows.
// * opk::avxvnni: AVX-VNNI (the VEX-encoded VPDPBUSD of Alder Lake / Sapphire Rapids and
//   later, Zen 5): u8 x s8 -> s32 with four products per lane, as the AVX-512 VNNI kernel
//   does it in 256-bit vectors: A biased to u8 (a + 128), 128 * sum(B column) subtracted.
//
// Each has an in-place variant on the (n, k) row-major weight (gemm_nt: dot products of
// contiguous rows) and one on the packed weight of kernels/quant_matmul_packed.h (16
// columns x 4 k-values per 64-byte row: two 8-column halves, one 256-bit vector each).
// has_avx_vnni() says whether the AVX-VNNI ones may run (OP_SDK_CPU_ISA, simd.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "quant_matmul.h"  // gemm_nt_padded_k
#include "simd.h"

namespace opk {

// A (m, k) int8 as int16 rows of kpad (gemm_nt_padded_k) values, zero past k.
inline void int8_gemm_prepare_a16(const int8_t* a, int64_t lda, int64_t m, int64_t k,
                                  int16_t* a16) {
  const int64_t kpad = gemm_nt_padded_k(k);
  for (int64_t i = 0; i < m; ++i) {
    const int8_t* src = a + i * lda;
    int16_t* dst = a16 + i * kpad;
    for (int64_t j = 0; j < k; ++j) dst[j] = src[j];
    std::fill(dst + k, dst + kpad, int16_t(0));
  }
}

}  // namespace opk

#if OPK_X86
namespace opk {
namespace avx2mm {

// the 8 lane sums of v, exact in wrapping int32
inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

// R weight rows x MB rows of A, 16 k-values per step; the k tail (< 16) of the weight is
// read through a zero-padded copy (A is zero there anyway).
template <int R, int MB>
inline void block(const int16_t* a16, int64_t kpad, const int8_t* b, int64_t ldb, int64_t k,
                  int32_t* c, int64_t ldc) {
  __m256i acc[MB][R];
  for (int i = 0; i < MB; ++i)
    for (int r = 0; r < R; ++r) acc[i][r] = _mm256_setzero_si256();
  // One k step, written out for the whole steps and the tail rather than as a lambda:
  // gcc 12 keeps arrays a lambda captures by reference in memory (see
  // kernels/quant_matmul.h). ROW(r): where weight row r's 16 values lie.
#define OPK_AVX2_STEP(ROW)                                                                  \
  _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {                                     \
    const __m256i bv =                                                                      \
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ROW)));       \
    _Pragma("GCC unroll 8") for (int i = 0; i < MB; ++i) {                                  \
      const __m256i av =                                                                    \
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a16 + i * kpad + kk));        \
      acc[i][r] = _mm256_add_epi32(acc[i][r], _mm256_madd_epi16(av, bv));                   \
    }                                                                                       \
  }
  int64_t kk = 0;
  for (; kk + 16 <= k; kk += 16) { OPK_AVX2_STEP(b + r * ldb + kk) }
  if (kk < k) {
    alignas(16) int8_t tail[R][16] = {};
    for (int r = 0; r < R; ++r) std::memcpy(tail[r], b + r * ldb + kk, size_t(k - kk));
    OPK_AVX2_STEP(tail[r])
  }
#undef OPK_AVX2_STEP
  for (int i = 0; i < MB; ++i)
    for (int r = 0; r < R; ++r) c[i * ldc + r] = hsum(acc[i][r]);
}

template <int MB>
inline void rows_of_b(const int16_t* a16, int64_t kpad, const int8_t* b, int64_t ldb, int64_t k,
                      int64_t j0, int64_t j1, int32_t* c, int64_t ldc) {
  int64_t j = j0;
  for (; j + 2 <= j1; j += 2) block<2, MB>(a16, kpad, b + j * ldb, ldb, k, c + j, ldc);
  for (; j < j1; ++j) block<1, MB>(a16, kpad, b + j * ldb, ldb, k, c + j, ldc);
}

// C[i, j] for i < m and j in [j0, j1): a16 from int8_gemm_prepare_a16, weight rows
// b + j * ldb (k bytes each).
inline void gemm_nt(const int16_t* a16, int64_t m, const int8_t* b, int64_t ldb, int64_t k,
                    int64_t j0, int64_t j1, int32_t* c, int64_t ldc) {
  const int64_t kpad = gemm_nt_padded_k(k);
  const int64_t panel = std::max<int64_t>(2, (16384 / std::max<int64_t>(k, 1)) / 2 * 2);
  for (int64_t p0 = j0; p0 < j1; p0 += panel) {
    const int64_t p1 = std::min(j1, p0 + panel);
    int64_t i = 0;
    for (; i + 6 <= m; i += 6) rows_of_b<6>(a16 + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc);
    switch (m - i) {
      case 5: rows_of_b<5>(a16 + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 4: rows_of_b<4>(a16 + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 3: rows_of_b<3>(a16 + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 2: rows_of_b<2>(a16 + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 1: rows_of_b<1>(a16 + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      default: break;
    }
  }
}

// Stores the 8 int32 of v (columns j..j+7) to c, the first `cols` of them.
inline void store_cols(int32_t* c, __m256i v, int cols) {
  if (cols >= 8) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), v);
  } else {
    alignas(32) int32_t t[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), v);
    std::memcpy(c, t, size_t(cols) * sizeof(int32_t));
  }
}

// Packed weight: one 8-column half (h = 0 or 1) of block b, MB (<= 6) rows of A. Per 4
// k-values the half is 32 bytes (column c at bytes 4c..4c+3), sign-extended as two vectors
// of 4 columns x 4 k; VPMADDWD with the broadcast quad of A leaves per column two partial
// sums (k 0-1, k 2-3) in adjacent lanes, added pairwise at the end.
template <int MB>
inline void packed_half(const int16_t* a16, int64_t kpad, const int8_t* blk, int h, int64_t j,
                        int64_t n, int32_t* c, int64_t ldc) {
  __m256i acc[MB][2];
  for (int i = 0; i < MB; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  const int8_t* p = blk + 32 * h;
  for (int64_t r = 0; r < kpad / 4; ++r, p += 64) {
    const __m256i w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    const __m256i w1 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16)));
    for (int i = 0; i < MB; ++i) {
      int64_t quad;
      std::memcpy(&quad, a16 + i * kpad + 4 * r, 8);
      const __m256i av = _mm256_set1_epi64x(quad);
      acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(w0, av));
      acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(w1, av));
    }
  }
  const int cols = int(std::min<int64_t>(8, n - j));
  for (int i = 0; i < MB; ++i) {
    // lanes: [c0 c0' c1 c1' | c2 c2' c3 c3'] and the same for c4..c7
    const __m256i s = _mm256_hadd_epi32(acc[i][0], acc[i][1]);  // [c0 c1 c4 c5 | c2 c3 c6 c7]
    store_cols(c + i * ldc + j, _mm256_permute4x64_epi64(s, 0xd8), cols);
  }
}

// C[i, j] for i < m and the columns of packed blocks [b0, b1).
inline void packed_gemm(const int16_t* a16, int64_t m, const int8_t* pw, int64_t n, int64_t k,
                        int64_t b0, int64_t b1, int32_t* c, int64_t ldc) {
  const int64_t kpad = gemm_nt_padded_k(k);
  for (int64_t b = b0; b < b1; ++b) {
    const int8_t* blk = pw + b * 16 * kpad;
    for (int h = 0; h < 2 && b * 16 + 8 * h < n; ++h) {
      const int64_t j = b * 16 + 8 * h;
      int64_t i = 0;
      for (; i + 6 <= m; i += 6) packed_half<6>(a16 + i * kpad, kpad, blk, h, j, n, c + i * ldc, ldc);
      switch (m - i) {
        case 5: packed_half<5>(a16 + i * kpad, kpad, blk, h, j, n, c + i * ldc, ldc); break;
        case 4: packed_half<4>(a16 + i * kpad, kpad, blk, h, j, n, c + i * ldc, ldc); break;
        case 3: packed_half<3>(a16 + i * kpad, kpad, blk, h, j, n, c + i * ldc, ldc); break;
        case 2: packed_half<2>(a16 + i * kpad, kpad, blk, h, j, n, c + i * ldc, ldc); break;
        case 1: packed_half<1>(a16 + i * kpad, kpad, blk, h, j, n, c + i * ldc, ldc); break;
        default: break;
      }
    }
  }
}

}  // namespace avx2mm
}  // namespace opk

// ---------------------------------------------------------------------------------------
#pragma GCC push_options
#pragma GCC target("avxvnni")
namespace opk {
namespace avxvnni {

// R weight rows x MB rows of A (u8, a + 128, kpad bytes each), 32 k-values per step, plus
// the R weight-row sums (VPDPBUSD of ones) for the correction.
template <int R, int MB>
inline void block(const uint8_t* au, int64_t kpad, const int8_t* b, int64_t ldb, int64_t k,
                  int32_t* c, int64_t ldc) {
  __m256i acc[MB][R], bsum[R];
  for (int r = 0; r < R; ++r) {
    bsum[r] = _mm256_setzero_si256();
    for (int i = 0; i < MB; ++i) acc[i][r] = _mm256_setzero_si256();
  }
  const __m256i ones = _mm256_set1_epi8(1);
  // (a step written out, not a lambda: see avx2mm::block)
#define OPK_AVX_VNNI_STEP(ROW)                                                              \
  {                                                                                         \
    __m256i bv[R];                                                                          \
    _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r) {                                   \
      bv[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ROW));                    \
      bsum[r] = _mm256_dpbusd_avx_epi32(bsum[r], ones, bv[r]);                              \
    }                                                                                       \
    _Pragma("GCC unroll 8") for (int i = 0; i < MB; ++i) {                                  \
      const __m256i av =                                                                    \
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(au + i * kpad + kk));         \
      _Pragma("GCC unroll 4") for (int r = 0; r < R; ++r)                                   \
        acc[i][r] = _mm256_dpbusd_avx_epi32(acc[i][r], av, bv[r]);                          \
    }                                                                                       \
  }
  int64_t kk = 0;
  for (; kk + 32 <= k; kk += 32) OPK_AVX_VNNI_STEP(b + r * ldb + kk)
  if (kk < k) {
    alignas(32) int8_t tail[R][32] = {};
    for (int r = 0; r < R; ++r) std::memcpy(tail[r], b + r * ldb + kk, size_t(k - kk));
    OPK_AVX_VNNI_STEP(tail[r])
  }
#undef OPK_AVX_VNNI_STEP
  // sum((a + 128) * b) - 128 * sum(b), in wrapping 32-bit arithmetic like the GEMM
  for (int r = 0; r < R; ++r) {
    const uint32_t corr = uint32_t(avx2mm::hsum(bsum[r])) << 7;
    for (int i = 0; i < MB; ++i)
      c[i * ldc + r] = int32_t(uint32_t(avx2mm::hsum(acc[i][r])) - corr);
  }
}

template <int MB>
inline void rows_of_b(const uint8_t* au, int64_t kpad, const int8_t* b, int64_t ldb, int64_t k,
                      int64_t j0, int64_t j1, int32_t* c, int64_t ldc) {
  int64_t j = j0;
  for (; j + 2 <= j1; j += 2) block<2, MB>(au, kpad, b + j * ldb, ldb, k, c + j, ldc);
  for (; j < j1; ++j) block<1, MB>(au, kpad, b + j * ldb, ldb, k, c + j, ldc);
}

// C[i, j] for i < m and j in [j0, j1): au from int8_gemm_nt_prepare_a (quant_matmul.h).
inline void gemm_nt(const uint8_t* au, int64_t m, const int8_t* b, int64_t ldb, int64_t k,
                    int64_t j0, int64_t j1, int32_t* c, int64_t ldc) {
  const int64_t kpad = gemm_nt_padded_k(k);
  const int64_t panel = std::max<int64_t>(2, (16384 / std::max<int64_t>(k, 1)) / 2 * 2);
  for (int64_t p0 = j0; p0 < j1; p0 += panel) {
    const int64_t p1 = std::min(j1, p0 + panel);
    int64_t i = 0;
    for (; i + 5 <= m; i += 5) rows_of_b<5>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc);
    switch (m - i) {
      case 4: rows_of_b<4>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 3: rows_of_b<3>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 2: rows_of_b<2>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      case 1: rows_of_b<1>(au + i * kpad, kpad, b, ldb, k, p0, p1, c + i * ldc, ldc); break;
      default: break;
    }
  }
}

// Packed weight: block b's 16 columns (two vectors of 8) against MB (<= 6) rows of A.
template <int MB>
inline void packed_block(const uint8_t* au, int64_t kpad, const int8_t* blk,
                         const int32_t* sums, int64_t j, int64_t n, int32_t* c, int64_t ldc) {
  __m256i acc[MB][2];
  for (int i = 0; i < MB; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
  const int8_t* p = blk;
  for (int64_t r = 0; r < kpad / 4; ++r, p += 64) {
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
    for (int i = 0; i < MB; ++i) {
      int32_t quad;
      std::memcpy(&quad, au + i * kpad + 4 * r, 4);
      const __m256i av = _mm256_set1_epi32(quad);
      acc[i][0] = _mm256_dpbusd_avx_epi32(acc[i][0], av, w0);
      acc[i][1] = _mm256_dpbusd_avx_epi32(acc[i][1], av, w1);
    }
  }
  for (int h = 0; h < 2 && j + 8 * h < n; ++h) {
    const __m256i corr = _mm256_slli_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums + j + 8 * h)), 7);
    const int cols = int(std::min<int64_t>(8, n - j - 8 * h));
    for (int i = 0; i < MB; ++i)
      avx2mm::store_cols(c + i * ldc + j + 8 * h, _mm256_sub_epi32(acc[i][h], corr), cols);
  }
}

// C[i, j] for i < m and the columns of packed blocks [b0, b1); au: m rows of kpad bytes.
inline void packed_gemm(const uint8_t* au, int64_t m, const int8_t* pw, const int32_t* sums,
                        int64_t n, int64_t k, int64_t b0, int64_t b1, int32_t* c, int64_t ldc) {
  const int64_t kpad = gemm_nt_padded_k(k);
  for (int64_t b = b0; b < b1; ++b) {
    const int8_t* blk = pw + b * 16 * kpad;
    const int64_t j = b * 16;
    int64_t i = 0;
    for (; i + 6 <= m; i += 6) packed_block<6>(au + i * kpad, kpad, blk, sums, j, n, c + i * ldc, ldc);
    switch (m - i) {
      case 5: packed_block<5>(au + i * kpad, kpad, blk, sums, j, n, c + i * ldc, ldc); break;
      case 4: packed_block<4>(au + i * kpad, kpad, blk, sums, j, n, c + i * ldc, ldc); break;
      case 3: packed_block<3>(au + i * kpad, kpad, blk, sums, j, n, c + i * ldc, ldc); break;
      case 2: packed_block<2>(au + i * kpad, kpad, blk, sums, j, n, c + i * ldc, ldc); break;
      case 1: packed_block<1>(au + i * kpad, kpad, blk, sums, j, n, c + i * ldc, ldc); break;
      default: break;
    }
  }
}

}  // namespace avxvnni
}  // namespace opk
#pragma GCC pop_options
#endif  // OPK_X86
