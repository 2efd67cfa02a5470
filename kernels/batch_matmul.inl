// Body of the few-row matmul of batch_matmul.h, compiled once per instruction set.

constexpr int64_t kPrefetchRows = 8;

// MB rows of x times NV column vectors starting at column j (cnt: Full, or the element
// count of a single partial vector when NV == 1).
template <int MB, int NV, typename T, typename Cnt>
inline void small_m_block(const float* x, int64_t ldx, const T* w, int64_t ldw, T* out,
                          int64_t ldo, int64_t k, int64_t j, Cnt cnt) {
  Vec acc[MB][NV];
  for (int i = 0; i < MB; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = zero();
  for (int64_t kk = 0; kk < k; ++kk) {
    const T* wr = w + kk * ldw + j;
    // the weight is read down a column panel, one short piece per row: fetch the piece
    // kPrefetchRows rows ahead so DRAM latency is not paid row by row (decode-sized x, where
    // the weight is the whole cost)
    __builtin_prefetch(wr + kPrefetchRows * ldw, 0, 3);
    Vec wv[NV];
    for (int v = 0; v < NV; ++v) wv[v] = load(wr + v * Vec::N, cnt);
    for (int i = 0; i < MB; ++i) {
      const Vec xv = set1(x[i * ldx + kk]);
      for (int v = 0; v < NV; ++v) acc[i][v] = fma(xv, wv[v], acc[i][v]);
    }
  }
  for (int i = 0; i < MB; ++i)
    for (int v = 0; v < NV; ++v) store(out + i * ldo + j + v * Vec::N, acc[i][v], cnt);
}

template <int MB, typename T>
inline void small_m_rows(const float* x, int64_t ldx, const T* w, int64_t ldw, T* out,
                         int64_t ldo, int64_t k, int64_t n0, int64_t n1) {
  // vectors per block: 4 with AVX-512's 32 registers (6 x 4 accumulators, 4 weight
  // vectors, 1 broadcast), 2 with the 16 of AVX2 (6 x 2 + 2 + 1), where 6 x 4 would spill
  // the accumulators to the stack on every step of k
  // One or two rows (decode): the weight is the whole cost, so a block spans 8 (1 row) or
  // 4 (2 rows) vectors: whole cache lines of each weight row in one pass down the panel.
  constexpr int kNV = MB == 1 ? 8 : MB == 2 ? 4 : Vec::N >= 16 ? 4 : 2;
  int64_t j = n0;
  for (; j + kNV * Vec::N <= n1; j += kNV * Vec::N)
    small_m_block<MB, kNV>(x, ldx, w, ldw, out, ldo, k, j, Full{});
  for (; j + Vec::N <= n1; j += Vec::N)
    small_m_block<MB, 1>(x, ldx, w, ldw, out, ldo, k, j, Full{});
  if (j < n1) small_m_block<MB, 1>(x, ldx, w, ldw, out, ldo, k, j, int(n1 - j));
}

// x rows are read as fp32 (converted once into xf, m * k floats, when T is not float):
// the inner loop then broadcasts straight from memory, one instruction per value.
template <typename T>
void small_m_matmul(const T* x, int64_t ldx, const T* w, int64_t ldw, T* out, int64_t ldo,
                    int64_t m, int64_t k, int64_t n0, int64_t n1, float* xf) {
  const float* xr;
  int64_t ldr;
  if constexpr (std::is_same_v<T, float>) {
    xr = x;
    ldr = ldx;
  } else {
    for (int64_t i = 0; i < m; ++i)
      for_each_vec(k, [&](int64_t c, auto cnt) { store(xf + i * k + c, load(x + i * ldx + c, cnt), cnt); });
    xr = xf;
    ldr = k;
  }
  // 6 rows at a time (small_m_rows: 6 x 4 or 6 x 2 accumulators)
  int64_t i = 0;
  for (; i + 6 <= m; i += 6) small_m_rows<6>(xr + i * ldr, ldr, w, ldw, out + i * ldo, ldo, k, n0, n1);
  switch (m - i) {
    case 5: small_m_rows<5>(xr + i * ldr, ldr, w, ldw, out + i * ldo, ldo, k, n0, n1); break;
    case 4: small_m_rows<4>(xr + i * ldr, ldr, w, ldw, out + i * ldo, ldo, k, n0, n1); break;
    case 3: small_m_rows<3>(xr + i * ldr, ldr, w, ldw, out + i * ldo, ldo, k, n0, n1); break;
    case 2: small_m_rows<2>(xr + i * ldr, ldr, w, ldw, out + i * ldo, ldo, k, n0, n1); break;
    case 1: small_m_rows<1>(xr + i * ldr, ldr, w, ldw, out + i * ldo, ldo, k, n0, n1); break;
    default: break;
  }
}
