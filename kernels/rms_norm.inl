// Row kernels of npu_rms_norm, npu_add_rms_norm and npu_add_rms_norm_cast.
// Body of kernels/rms_norm.h, compiled once per instruction set (Vec, load, store, ...
// come from that set's namespace in simd.h). All arithmetic is fp32; inputs are up-cast
// once into a row scratch buffer, outputs rounded once.

// 1 / sqrt(mean(x^2) + eps), in the order the reference computes it.
inline float rstd_from_sumsq(float sumsq, int64_t n, float eps) {
  return 1.0f / std::sqrt(sumsq / float(n) + eps);
}

// Two accumulator chains: f(j, tail, acc) with acc alternating, to hide FMA latency.
template <typename F>
inline void for_each_vec_2acc(int64_t n, Vec& acc0, Vec& acc1, F&& f) {
  int64_t j = 0;
  for (; j + 2 * Vec::N <= n; j += 2 * Vec::N) {
    f(j, Full{}, acc0);
    f(j + Vec::N, Full{}, acc1);
  }
  if (j + Vec::N <= n) {
    f(j, Full{}, acc0);
    j += Vec::N;
  }
  if (j < n) f(j, int(n - j), acc1);
}

// A row's sum of squares, f(j0, len, acc0, acc1) adding elements [j0, j0 + len) into the
// two vector accumulators: fp32 within blocks of kSumBlock elements (a few dozen terms per
// lane), the blocks' sums added in double. A single fp32 chain per lane drifts with the row
// length (1e5 elements: 1.5e-5 relative on rstd, 1e6: 1.5e-4); blocked, the error stays
// at the fp32 rounding of one block at any length.
constexpr int64_t kSumBlock = 1024;
template <typename F>
inline float blocked_sumsq(int64_t n, F&& f) {
  double total = 0.0;
  for (int64_t j0 = 0; j0 < n; j0 += kSumBlock) {
    Vec a0 = zero(), a1 = zero();
    f(j0, n - j0 < kSumBlock ? n - j0 : kSumBlock, a0, a1);
    total += double(reduce_add(a0 + a1));
  }
  return float(total);
}

// scr = float(x); returns sum(x^2).
template <typename T>
inline float load_row_sumsq(const T* x, float* scr, int64_t n) {
  return blocked_sumsq(n, [&](int64_t j0, int64_t len, Vec& a0, Vec& a1) {
    for_each_vec_2acc(len, a0, a1, [&](int64_t j, auto tail, Vec& acc) {
      Vec v = load(x + j0 + j, tail);
      store(scr + j0 + j, v, tail);
      acc = fma(v, v, acc);
    });
  });
}

// sum(x^2) of an fp32 row in place.
inline float row_sumsq(const float* x, int64_t n) {
  return blocked_sumsq(n, [&](int64_t j0, int64_t len, Vec& a0, Vec& a1) {
    for_each_vec_2acc(len, a0, a1, [&](int64_t j, auto tail, Vec& acc) {
      Vec v = load(x + j0 + j, tail);
      acc = fma(v, v, acc);
    });
  });
}

// An output store: non-temporal for whole vectors when kStream (see the launchers).
template <bool kStream, typename T, typename Tail>
inline void put(T* p, Vec v, Tail tail) {
  if constexpr (kStream && std::is_same<Tail, Full>::value) store_stream(p, v);
  else store(p, v, tail);
}
template <bool kStream, typename Tail>
inline void put_q(int8_t* p, Vec v, Vec lo, Vec hi, Tail tail) {
  if constexpr (kStream && std::is_same<Tail, Full>::value) store_q_stream(p, v, lo, hi);
  else store_q(p, v, lo, hi, tail);
}

// scr = float(a) + float(b) (unrounded), xo = that sum rounded to T; returns sum(scr^2).
template <bool kStream = false, typename T>
inline float add_row_sumsq(const T* a, const T* b, float* scr, T* xo, int64_t n) {
  return blocked_sumsq(n, [&](int64_t j0, int64_t len, Vec& a0, Vec& a1) {
    for_each_vec_2acc(len, a0, a1, [&](int64_t j, auto tail, Vec& acc) {
      Vec v = load(a + j0 + j, tail) + load(b + j0 + j, tail);
      store(scr + j0 + j, v, tail);
      put<kStream>(xo + j0 + j, v, tail);
      acc = fma(v, v, acc);
    });
  });
}

// npu_rms_norm's y of one vector, before its rounding: x * rstd * gamma (that order).
inline Vec normed(Vec x, Vec rstd, Vec gamma) { return x * rstd * gamma; }


// y = x * rstd * gamma over rows of n = numel(gamma) elements.
template <typename T, typename G>
void rms_norm_rows(const T* x, const G* gamma, T* y, float* rstd, int64_t rows, int64_t n,
                   float eps, bool stream) {
  RowBuffer<float> buf(std::is_same<T, float>::value ? 0 : n);
  with_flags([&](auto streamed) {
    constexpr bool kStream = decltype(streamed)::value;
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      const float* s;
      float ss;
      if constexpr (std::is_same<T, float>::value) {
        s = xr;  // already fp32: no scratch copy
        ss = row_sumsq(xr, n);
      } else {
        s = buf.data;
        ss = load_row_sumsq(xr, buf.data, n);
      }
      const float rs = rstd_from_sumsq(ss, n, eps);
      rstd[r] = rs;
      const Vec vr = set1(rs);
      T* yr = y + r * n;
      const bool next = r + 1 < rows;
      for_each_vec(n, [&](int64_t j, auto tail) {
        if (next) prefetch_row_part(xr + n, j);
        put<kStream>(yr + j, normed(load(s + j, tail), vr, load(gamma + j, tail)), tail);
      });
    }
    if constexpr (kStream) store_fence();  // order the streamed stores before the join
  }, stream);
}

// x = x1 + x2; y = x * rstd * gamma from the unrounded sum. Writes y (T) and / or y32
// (fp32; npu_add_rms_norm_cast's y1), rstd, and xo = x rounded to T.
template <typename T>
void add_rms_norm_rows(const T* x1, const T* x2, const T* gamma, T* y, float* y32,
                       float* rstd, T* xo, int64_t rows, int64_t n, float eps, bool stream) {
  RowBuffer<float> buf(n);
  float* s = buf.data;
  with_flags([&](auto has_y, auto has_y32, auto streamed) {
    constexpr bool kStream = decltype(streamed)::value;
    for (int64_t r = 0; r < rows; ++r) {
      const float rs = rstd_from_sumsq(
          add_row_sumsq<kStream>(x1 + r * n, x2 + r * n, s, xo + r * n, n), n, eps);
      rstd[r] = rs;
      const Vec vr = set1(rs);
      const bool next = r + 1 < rows;
      for_each_vec(n, [&](int64_t j, auto tail) {
        if (next) {
          prefetch_row_part(x1 + (r + 1) * n, j);
          prefetch_row_part(x2 + (r + 1) * n, j);
        }
        Vec v = load(s + j, tail) * vr * load(gamma + j, tail);
        if constexpr (decltype(has_y32)::value) put<kStream>(y32 + r * n + j, v, tail);
        if constexpr (decltype(has_y)::value) put<kStream>(y + r * n + j, v, tail);
      });
    }
    if constexpr (kStream) store_fence();
  }, y != nullptr, y32 != nullptr, stream);
}
