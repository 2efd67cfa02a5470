// npu_quant_matmul's product against a prepacked int8 weight (torch-free).
//
// Packed layout of an (n, k) int8 weight (row j = output column j): blocks of 16 columns,
// one after the other; a block holds kpad / 4 rows of 64 bytes, row r = k-values
// 4r..4r+3 of each of the 16 columns (column c at bytes 4c..4c+3), zero past k and past
// n. That row is what VPDPBUSD / TDPBSSD take as their "B" operand (the VNNI order), so a
// block is read front to back, once, by both kernels below, with no shuffles; the AVX2 /
// AVX-VNNI kernels of kernels/quant_matmul_avx2.h read a row as two 8-column vectors. Next to it,
// each column's sum (int32), which the u8 x s8 VNNI product needs to correct its bias, and
// what it was packed from (Source: the weight's address, shape and strides): the operator
// uses the packed copy only while its x2 is still that weight, viewed the same way.
// (TorchAir's frozen_parameter + GE convert matmul weights to FRACTAL_NZ on the NPU for
// the same reason: the weight is the bulk of the traffic at decode sizes.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "quant_matmul.h"
#include "quant_matmul_amx.h"

namespace opk {
namespace packed {

// k is padded as the A rows of both kernels are: gemm_nt_padded_k (quant_matmul.h)
inline int64_t padded_k(int64_t k) { return gemm_nt_padded_k(k); }
inline int64_t blocks(int64_t n) { return (n + 15) / 16; }
// The (k, n) weight a packed copy was packed from: the address of its first element, its
// shape and its strides (int64 each, in this order). The operator compares all five with
// its x2: a view of the same memory with another shape or strides (the transpose of a
// square weight, a slice of fewer rows) is not the packed weight.
struct Source {
  int64_t address, k, n, stride_k, stride_n;
  bool operator==(const Source& o) const {
    return address == o.address && k == o.k && n == o.n && stride_k == o.stride_k &&
           stride_n == o.stride_n;
  }
};
// bytes of the packed weight, then blocks(n) * 16 int32 column sums, then its Source
inline int64_t weight_bytes(int64_t n, int64_t k) { return blocks(n) * 16 * padded_k(k); }
inline int64_t source_offset(int64_t n, int64_t k) {
  return weight_bytes(n, k) + blocks(n) * 16 * int64_t(sizeof(int32_t));
}
inline int64_t total_bytes(int64_t n, int64_t k) {
  return source_offset(n, k) + int64_t(sizeof(Source));
}
inline Source source_of(const int8_t* packed, int64_t n, int64_t k) {
  Source v;
  std::memcpy(&v, packed + source_offset(n, k), sizeof(v));
  return v;
}

inline const int32_t* column_sums(const int8_t* packed, int64_t n, int64_t k) {
  return reinterpret_cast<const int32_t*>(packed + weight_bytes(n, k));
}

// w: element (j, kk) at w[j * ldw + kk * ldk]. out: total_bytes(n, k) bytes.
inline void pack(const int8_t* w, int64_t ldw, int64_t ldk, int64_t n, int64_t k,
                 int8_t* out) {
  const Source source{int64_t(reinterpret_cast<uintptr_t>(w)), k, n, ldk, ldw};
  const int64_t kpad = padded_k(k), nbk = blocks(n);
  int32_t* sums = reinterpret_cast<int32_t*>(out + weight_bytes(n, k));
  std::memset(out, 0, size_t(total_bytes(n, k)));
  for (int64_t b = 0; b < nbk; ++b) {
    int8_t* blk = out + b * 16 * kpad;
    for (int c = 0; c < 16 && b * 16 + c < n; ++c) {
      const int8_t* row = w + (b * 16 + c) * ldw;
      uint32_t s = 0;  // wraps like the int32 product
      for (int64_t kk = 0; kk < k; ++kk) {
        const int8_t v = row[kk * ldk];
        blk[(kk / 4) * 64 + c * 4 + kk % 4] = v;
        s += uint32_t(int32_t(v));
      }
      sums[b * 16 + c] = int32_t(s);
    }
  }
  std::memcpy(out + source_offset(n, k), &source, sizeof(source));
}

}  // namespace packed
}  // namespace opk

#if OPK_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
namespace opk {
namespace packed {
namespace vnni {

// C[i, 16 * b ...] for i < MB (<= 8) and NB (<= 8, MB * NB <= 24) column blocks from b: per
// 4 k-values, NB weight rows loaded once, each multiplied with the MB broadcast quads of A
// (u8 = a + 128). The accumulators are named variables (c<row>_<block>), unrolled by the
// preprocessor: as an array indexed in loops, gcc 12 keeps them in memory and stores every
// one of them at each step (and inlined into its callers, it does so again: noinline).
#define OPK_VNNI_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <int MB, int NB>
__attribute__((noinline)) void blocks_of(const uint8_t* au, int64_t kpad, const int8_t* pw,
                                         const int32_t* sums, int64_t b, int64_t n, int32_t* c,
                                         int64_t ldc) {
  static_assert(MB >= 1 && MB <= 8 && NB >= 1 && NB <= 8 && MB * NB <= 24);
#define OPK_VNNI_DECL(i)                                                                  \
  __m512i c##i##_0 = _mm512_setzero_si512(), c##i##_1 = c##i##_0, c##i##_2 = c##i##_0, \
          c##i##_3 = c##i##_0, c##i##_4 = c##i##_0, c##i##_5 = c##i##_0, c##i##_6 = c##i##_0, \
          c##i##_7 = c##i##_0;
  OPK_VNNI_ROWS8(OPK_VNNI_DECL)
#undef OPK_VNNI_DECL
  const int8_t* base = pw + b * 16 * kpad;
  for (int64_t r = 0; r < kpad / 4; ++r) {
    const __m512i w0 = _mm512_loadu_si512(base + r * 64);
    const __m512i w1 = NB > 1 ? _mm512_loadu_si512(base + 16 * kpad + r * 64) : w0;
    const __m512i w2 = NB > 2 ? _mm512_loadu_si512(base + 32 * kpad + r * 64) : w0;
    const __m512i w3 = NB > 3 ? _mm512_loadu_si512(base + 48 * kpad + r * 64) : w0;
    const __m512i w4 = NB > 4 ? _mm512_loadu_si512(base + 64 * kpad + r * 64) : w0;
    const __m512i w5 = NB > 5 ? _mm512_loadu_si512(base + 80 * kpad + r * 64) : w0;
    const __m512i w6 = NB > 6 ? _mm512_loadu_si512(base + 96 * kpad + r * 64) : w0;
    const __m512i w7 = NB > 7 ? _mm512_loadu_si512(base + 112 * kpad + r * 64) : w0;
#define OPK_VNNI_STEP(i)                                                        \
  if constexpr (i < MB) {                                                       \
    int32_t quad;                                                               \
    std::memcpy(&quad, au + i * kpad + 4 * r, 4);                               \
    const __m512i av = _mm512_set1_epi32(quad);                                 \
    c##i##_0 = _mm512_dpbusd_epi32(c##i##_0, av, w0);                           \
    if constexpr (NB > 1) c##i##_1 = _mm512_dpbusd_epi32(c##i##_1, av, w1);     \
    if constexpr (NB > 2) c##i##_2 = _mm512_dpbusd_epi32(c##i##_2, av, w2);     \
    if constexpr (NB > 3) c##i##_3 = _mm512_dpbusd_epi32(c##i##_3, av, w3);     \
    if constexpr (NB > 4) c##i##_4 = _mm512_dpbusd_epi32(c##i##_4, av, w4);     \
    if constexpr (NB > 5) c##i##_5 = _mm512_dpbusd_epi32(c##i##_5, av, w5);     \
    if constexpr (NB > 6) c##i##_6 = _mm512_dpbusd_epi32(c##i##_6, av, w6);     \
    if constexpr (NB > 7) c##i##_7 = _mm512_dpbusd_epi32(c##i##_7, av, w7);     \
  }
    OPK_VNNI_ROWS8(OPK_VNNI_STEP)
#undef OPK_VNNI_STEP
  }
  // C = acc - 128 * column sum; every accumulator named once, in straight-line code (a
  // loop over the blocks that selects among them makes gcc spill them all in the main loop)
  const auto store = [&](int v, int i, __m512i acc) {
    const __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512(sums + (b + v) * 16), 7);
    const int64_t j = (b + v) * 16;
    const int cols = int(std::min<int64_t>(16, n - j));
    _mm512_mask_storeu_epi32(c + i * ldc + j, __mmask16((1u << cols) - 1u),
                             _mm512_sub_epi32(acc, corr));
  };
#define OPK_VNNI_STORE(i)                        \
  if constexpr (i < MB) {                        \
    store(0, i, c##i##_0);                       \
    if constexpr (NB > 1) store(1, i, c##i##_1); \
    if constexpr (NB > 2) store(2, i, c##i##_2); \
    if constexpr (NB > 3) store(3, i, c##i##_3); \
    if constexpr (NB > 4) store(4, i, c##i##_4); \
    if constexpr (NB > 5) store(5, i, c##i##_5); \
    if constexpr (NB > 6) store(6, i, c##i##_6); \
    if constexpr (NB > 7) store(7, i, c##i##_7); \
  }
  OPK_VNNI_ROWS8(OPK_VNNI_STORE)
#undef OPK_VNNI_STORE
}
#undef OPK_VNNI_ROWS8

template <int MB>
inline void rows(const uint8_t* au, int64_t kpad, const int8_t* pw, const int32_t* sums,
                 int64_t b0, int64_t b1, int64_t n, int32_t* c, int64_t ldc) {
  int64_t b = b0;
  // one or two rows: 8 blocks at a time (8 / 16 independent accumulator chains)
  if constexpr (MB <= 2)
    for (; b + 8 <= b1; b += 8) blocks_of<MB, 8>(au, kpad, pw, sums, b, n, c, ldc);
  for (; b + 4 <= b1; b += 4) blocks_of<MB, 4>(au, kpad, pw, sums, b, n, c, ldc);
  for (; b < b1; ++b) blocks_of<MB, 1>(au, kpad, pw, sums, b, n, c, ldc);
}

// More rows, on a CPU with AVX-512 VNNI and no AMX (Ice Lake / Cascade Lake Xeons, AMD
// Zen 4 / Zen 5): register blocks of 8 rows x 3 column blocks (24 accumulators, 3 weight
// vectors and a broadcast: 28 of the 32 vector registers; 24 VPDPBUSD per 3 weight loads
// and 8 broadcasts). The column groups are the outer loop: a group's 3 x 16 x kpad bytes
// come from memory once and stay in the L1 / L2 caches for every further group of 8 rows
// (rows outer would read the task's whole weight from memory once per 8 rows).
template <int MB>
inline void wide_rows(const uint8_t* au, int64_t kpad, const int8_t* pw, const int32_t* sums,
                      int nb, int64_t b, int64_t n, int32_t* c, int64_t ldc) {
  if (nb == 3) return blocks_of<MB, 3>(au, kpad, pw, sums, b, n, c, ldc);
  if (nb == 2) return blocks_of<MB, 2>(au, kpad, pw, sums, b, n, c, ldc);
  blocks_of<MB, 1>(au, kpad, pw, sums, b, n, c, ldc);
}

inline void gemm_wide(const uint8_t* au, int64_t m, const int8_t* pw, int64_t n, int64_t k,
                      int64_t b0, int64_t b1, int32_t* c, int64_t ldc) {
  const int64_t kpad = padded_k(k);
  const int32_t* sums = reinterpret_cast<const int32_t*>(pw + weight_bytes(n, k));
  for (int64_t b = b0; b < b1; b += 3) {
    const int nb = int(std::min<int64_t>(3, b1 - b));
    int64_t i = 0;
    for (; i + 8 <= m; i += 8)
      wide_rows<8>(au + i * kpad, kpad, pw, sums, nb, b, n, c + i * ldc, ldc);
    const uint8_t* ar = au + i * kpad;
    int32_t* cr = c + i * ldc;
    switch (m - i) {
      case 7: wide_rows<7>(ar, kpad, pw, sums, nb, b, n, cr, ldc); break;
      case 6: wide_rows<6>(ar, kpad, pw, sums, nb, b, n, cr, ldc); break;
      case 5: wide_rows<5>(ar, kpad, pw, sums, nb, b, n, cr, ldc); break;
      case 4: wide_rows<4>(ar, kpad, pw, sums, nb, b, n, cr, ldc); break;
      case 3: wide_rows<3>(ar, kpad, pw, sums, nb, b, n, cr, ldc); break;
      case 2: wide_rows<2>(ar, kpad, pw, sums, nb, b, n, cr, ldc); break;
      case 1: wide_rows<1>(ar, kpad, pw, sums, nb, b, n, cr, ldc); break;
      default: break;
    }
  }
}

// C[i, j] for i < m and the columns of blocks [b0, b1); au: m rows of kpad bytes, a + 128.
// Up to 4 rows: blocks of those rows x 4 column blocks; more rows: gemm_wide.
inline void gemm(const uint8_t* au, int64_t m, const int8_t* pw, int64_t n, int64_t k,
                 int64_t b0, int64_t b1, int32_t* c, int64_t ldc) {
  if (m > 4) {
    gemm_wide(au, m, pw, n, k, b0, b1, c, ldc);
    return;
  }
  const int64_t kpad = padded_k(k);
  const int32_t* sums = reinterpret_cast<const int32_t*>(pw + weight_bytes(n, k));
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) rows<4>(au + i * kpad, kpad, pw, sums, b0, b1, n, c + i * ldc, ldc);
  switch (m - i) {
    case 3: rows<3>(au + i * kpad, kpad, pw, sums, b0, b1, n, c + i * ldc, ldc); break;
    case 2: rows<2>(au + i * kpad, kpad, pw, sums, b0, b1, n, c + i * ldc, ldc); break;
    case 1: rows<1>(au + i * kpad, kpad, pw, sums, b0, b1, n, c + i * ldc, ldc); break;
    default: break;
  }
}

}  // namespace vnni
}  // namespace packed
}  // namespace opk
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8")
namespace opk {
namespace packed {
namespace amx {

// C[i, j] for i < m (<= 64) and the columns of blocks [b0, b1); A prepared as
// opk::amx::prepare_a does (amx_padded_rows(m) rows of kpad bytes). The B tile of a block
// and 64 k-values is 1 KB of the packed weight, loaded as it lies.
inline void gemm(const int8_t* a, int64_t m, const int8_t* pw, int64_t n, int64_t k,
                 int64_t b0, int64_t b1, int32_t* c, int64_t ldc) {
  const int64_t kpad = padded_k(k);
  const int mt = opk::amx::configure_tiles(m);
  for (int64_t b = b0; b < b1; ++b) {
    const int8_t* blk = pw + b * 16 * kpad;
    opk::amx::zero_c_tiles(mt);
    for (int64_t kk = 0; kk < kpad; kk += 64) opk::amx::multiply_step(a, kpad, kk, mt, blk + kk * 16);
    opk::amx::store_c_tiles(mt, m, b * 16, int(std::min<int64_t>(16, n - b * 16)), c, ldc);
  }
  _tile_release();
}

}  // namespace amx
}  // namespace packed
}  // namespace opk
#pragma GCC pop_options
#endif  // OPK_X86
