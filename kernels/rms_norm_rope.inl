// Body of kernels/rms_norm_rope.h, compiled once per instruction set after the bodies of
// rms_norm.inl and rotary.inl (same namespace): rms_norm.inl's sum of squares, rstd and
// `normed`, rounded in registers as npu_rms_norm's store rounds it (round_to), then
// rotary.inl's rotation of the halves (rotate_halves_of): one pass over a row's floats.

// v rounded to T and back (T's store rounding), float unchanged.
template <typename T>
inline Vec round_to(Vec v) {
  if constexpr (std::is_same<T, bf16>::value) return round_bf16(v);
  else if constexpr (std::is_same<T, fp16>::value) return round_fp16(v);
  else return v;
}

// Rows are normalised kRopeRows at a time: a short row's sum of squares, its horizontal add
// and rstd's division and root are a chain of dependent steps longer than the row's
// arithmetic, and the rows of a block are independent, so their chains overlap.
constexpr int64_t kRopeRows = 4;

template <typename T, typename G>
void rms_norm_rope_rows(const T* x, int64_t x_stride, const G* gamma, const T* c, const T* s,
                        int64_t cs_stride, T* y, int64_t rows, int64_t d, float eps,
                        float* scratch, bool stream) {
  const int64_t h = d / 2;
  with_flags([&](auto streamed, auto shared) {
    constexpr bool kStream = decltype(streamed)::value;
    // rows that share one cos / sin row (the heads of a token) read it up-cast once
    float* cf = scratch + kRopeRows * d;
    float* sf = cf + d;
    if constexpr (decltype(shared)::value) {
      for_each_vec(d, [&](int64_t j, auto tail) {
        store(cf + j, load(c + j, tail), tail);
        store(sf + j, load(s + j, tail), tail);
      });
    }
    for (int64_t r0 = 0; r0 < rows; r0 += kRopeRows) {
      const int64_t n = rows - r0 < kRopeRows ? rows - r0 : kRopeRows;
      float rstd[kRopeRows];
      for (int64_t k = 0; k < n; ++k)
        rstd[k] = rstd_from_sumsq(load_row_sumsq(x + (r0 + k) * x_stride, scratch + k * d, d), d, eps);
      if (r0 + n < rows)  // the next block's rows, line by line (they may be far apart)
        for (int64_t k = 0; k < kRopeRows && r0 + n + k < rows; ++k)
          for (int64_t j = 0; j < d; j += int64_t(64 / sizeof(T)))
            prefetch_row_part(x + (r0 + n + k) * x_stride, j);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t r = r0 + k;
        const float* row = scratch + k * d;
        const Vec vr = set1(rstd[k]);
        auto t = [&](int64_t j, auto tail, bool second) {
          const int64_t i = (second ? h : 0) + j;
          return round_to<T>(normed(load(row + i, tail), vr, load(gamma + i, tail)));
        };
        if constexpr (decltype(shared)::value)
          rotate_halves_of<kStream>(t, cf, sf, y + r * d, h);
        else
          rotate_halves_of<kStream>(t, c + r * cs_stride, s + r * cs_stride, y + r * d, h);
      }
    }
    if constexpr (kStream) store_fence();  // order the streamed stores before the join
  }, stream, cs_stride == 0 && rows > 1);
}
