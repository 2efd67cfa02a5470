// AMX-INT8 variant of int8_gemm_nt (kernels/quant_matmul.h) for up to 64 rows of A:
// C (m, n) = A (m, k) * B^T with B the (n, k) row-major int8 weight, exact int32.
//
// TDPBSSD multiplies a (rows x 64) int8 tile of A by a (16 x 64) tile holding 64 k-values
// of 16 columns in "VNNI" order (row r: 4 consecutive k of each column). That tile is the
// dword transpose of 16 weight rows x 64 bytes, built in registers (a 16 x 16 dword
// transpose) straight from the weight as it lies, so the weight is read once per call and
// never repacked in memory. Each weight tile serves up to four 16-row tiles of A.
//
// Needs the CPU's AMX-TILE / AMX-INT8 and the kernel's permission for the tile state
// (arch_prctl ARCH_REQ_XCOMP_PERM), which amx_available() asks for once.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "quant_matmul.h"  // gemm_nt_padded_k
#include "simd.h"

#if OPK_X86
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace opk {

inline bool detect_amx() {
#if !OPK_X86
  return false;
#else
  if (!use_avx512()) return false;  // also off under OP_SDK_CPU_ISA=avx2
  // OP_SDK_AMX=0: as on an AVX-512 VNNI CPU without AMX (Ice Lake, AMD Zen 4 / Zen 5)
  if (const char* env = std::getenv("OP_SDK_AMX"); env != nullptr && std::strcmp(env, "0") == 0)
    return false;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = (d >> 24) & 1u, int8 = (d >> 25) & 1u;
  if (!tile || !int8) return false;
  constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
#endif
}
inline bool amx_available() {
  static const bool yes = detect_amx();
  return yes;
}

}  // namespace opk

#if OPK_X86
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8")
namespace opk {
namespace amx {

struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// 16 x 16 dword transpose of r[0..15] in registers.
inline void transpose16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // r[4q + s] now holds, in 128-bit lane l, dword column 4l + s' of rows 4q..4q+3
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_i32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_i32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_i32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_i32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

// The B tile of columns j..j+nr-1 (nr <= 16) and k-values kk..kk+kc-1 (kc <= 64), zeros
// outside, in VNNI order: tile[r] dword c = bytes 4r..4r+3 of weight row j + c.
inline void build_b_tile(const int8_t* b, int64_t ldb, int64_t j, int nr, int64_t kk, int kc,
                         int32_t* tile) {
  __m512i r[16];
  const __mmask64 mask = kc >= 64 ? ~__mmask64(0) : ((__mmask64(1) << kc) - 1);
  for (int c = 0; c < 16; ++c)
    r[c] = c < nr ? _mm512_maskz_loadu_epi8(mask, b + (j + c) * ldb + kk) : _mm512_setzero_si512();
  transpose16(r);  // r[p]: dword p of rows 0..15, in row order
  for (int p = 0; p < 16; ++p) _mm512_store_si512(tile + 16 * p, r[p]);
}

// Rows of the prepared A: m, or whole 16-row tiles when m > 16.
inline int64_t amx_padded_rows(int64_t m) { return m <= 16 ? m : (m + 15) / 16 * 16; }

// The rows of A (m rows, lda apart) as amx_padded_rows(m) rows of gemm_nt_padded_k(k)
// bytes, zero-padded: whole 64-byte tile rows, whole tiles.
inline void prepare_a(const int8_t* a, int64_t lda, int64_t m, int64_t k, int8_t* ap) {
  const int64_t kpad = gemm_nt_padded_k(k);
  std::memset(ap, 0, size_t(amx_padded_rows(m) * kpad));
  for (int64_t i = 0; i < m; ++i) std::memcpy(ap + i * kpad, a + i * lda, size_t(k));
}

// The tile layout of both AMX kernels (this one and kernels/quant_matmul_packed.h): C
// tiles 0..mt-1 (16-row blocks of A, every C / A tile with the same row count: a TDPBSSD
// rule, so for m > 16 A is padded to whole 16-row tiles, amx_padded_rows), A tile 4,
// B tile 5. Loads the configuration; returns mt.
inline int configure_tiles(int64_t m) {
  const int mt = int((m + 15) / 16);
  const uint8_t rows = uint8_t(std::min<int64_t>(16, m));
  TileConfig cfg;
  for (int t = 0; t < mt; ++t) {
    cfg.rows[t] = rows;
    cfg.colsb[t] = 64;
  }
  cfg.rows[4] = rows;
  cfg.colsb[4] = 64;
  cfg.rows[5] = 16;
  cfg.colsb[5] = 64;
  _tile_loadconfig(&cfg);
  return mt;
}

inline void zero_c_tiles(int mt) {
  _tile_zero(0);
  if (mt > 1) _tile_zero(1);
  if (mt > 2) _tile_zero(2);
  if (mt > 3) _tile_zero(3);
}

// C tiles += A[:, kk:kk+64] x B, B a 16 x 64-byte tile in VNNI order at `b`; one A tile
// register reloaded per 16-row block (A rows stay in L1).
inline void multiply_step(const int8_t* a, int64_t kpad, int64_t kk, int mt, const void* b) {
  _tile_loadd(5, b, 64);
  _tile_loadd(4, a + kk, kpad);
  _tile_dpbssd(0, 4, 5);
  if (mt > 1) {
    _tile_loadd(4, a + 16 * kpad + kk, kpad);
    _tile_dpbssd(1, 4, 5);
  }
  if (mt > 2) {
    _tile_loadd(4, a + 32 * kpad + kk, kpad);
    _tile_dpbssd(2, 4, 5);
  }
  if (mt > 3) {
    _tile_loadd(4, a + 48 * kpad + kk, kpad);
    _tile_dpbssd(3, 4, 5);
  }
}

// The C tiles into rows i < m, columns j..j+cols-1 of c.
inline void store_c_tiles(int mt, int64_t m, int64_t j, int cols, int32_t* c, int64_t ldc) {
  alignas(64) int32_t ctile[4][256];
  _tile_stored(0, ctile[0], 64);
  if (mt > 1) _tile_stored(1, ctile[1], 64);
  if (mt > 2) _tile_stored(2, ctile[2], 64);
  if (mt > 3) _tile_stored(3, ctile[3], 64);
  for (int64_t i = 0; i < m; ++i)
    std::memcpy(c + i * ldc + j, ctile[i / 16] + 16 * (i % 16), sizeof(int32_t) * size_t(cols));
}

// C[i, j] for i < m (<= 64) and j in [j0, j1), A prepared as amx_padded_rows(m) rows of
// kpad bytes (int8, zero-padded), B rows b + j * ldb. Runs on the calling thread
// (configures its tiles).
inline void int8_gemm_nt(const int8_t* a, int64_t kpad, int64_t m, const int8_t* b,
                         int64_t ldb, int64_t k, int64_t j0, int64_t j1, int32_t* c,
                         int64_t ldc) {
  const int mt = configure_tiles(m);
  alignas(64) int32_t btile[256];
  for (int64_t j = j0; j < j1; j += 16) {
    const int nr = int(std::min<int64_t>(16, j1 - j));
    zero_c_tiles(mt);
    for (int64_t kk = 0; kk < k; kk += 64) {
      build_b_tile(b, ldb, j, nr, kk, int(std::min<int64_t>(64, k - kk)), btile);
      multiply_step(a, kpad, kk, mt, btile);
    }
    store_c_tiles(mt, m, j, nr, c, ldc);
  }
  _tile_release();
}

}  // namespace amx
}  // namespace opk
#pragma GCC pop_options
#endif  // OPK_X86
