// Row kernels of npu_dynamic_quant and npu_quantize. Body of kernels/quant.h, compiled
// once per instruction set (see simd.h). fp32 math, round half to even, saturation.

// Stores rint(value(j, tail)) saturated to [lo, hi] for one row of n elements: straight
// into y8 (int8), or, when y8 is null, into qbuf and then packed 8 per int32 into y4.
template <typename F>
inline void quant_row(int64_t n, float lo, float hi, int8_t* y8, int32_t* y4, int8_t* qbuf,
                      F&& value) {
  const Vec vlo = set1(lo), vhi = set1(hi);
  int8_t* dst = y8 != nullptr ? y8 : qbuf;
  for_each_vec(n, [&](int64_t j, auto tail) { store_q(dst + j, value(j, tail), vlo, vhi, tail); });
  if (y8 == nullptr) pack_int4_row(qbuf, y4, n);
}

// The reciprocal the contract multiplies by: dmax / amax, 0 for an all-zero row.
inline float dynamic_mul(float amax, float dmax) { return amax > 0.0f ? dmax / amax : 0.0f; }

// max |x * smooth| of one row (smooth may be absent); NaN if the row has one.
template <typename T, typename S, bool kSmooth>
inline float row_absmax(const T* x, const S* smooth, int64_t n) {
  Vec m = zero();
  for_each_vec(n, [&](int64_t j, auto tail) {
    Vec v = load(x + j, tail);
    if constexpr (kSmooth) v = v * load(smooth + j, tail);
    m = absmax(m, v);
  });
  return reduce_absmax(m);
}

// Per-token dynamic quantisation of rows that share one smooth vector (or none):
// scale = amax / dmax, y = rint(s * (dmax / amax)). Output int8 (y8) or int4 packed (y4).
template <typename T, typename S>
void dynamic_quant_rows(const T* x, const S* smooth, int8_t* y8, int32_t* y4, float* scale,
                        int64_t rows, int64_t n, float dmax) {
  RowBuffer<float> buf(n);
  RowBuffer<int8_t> qbuf(y8 != nullptr ? 0 : n);
  float* s = buf.data;
  with_flags([&](auto has_smooth) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      Vec m = zero();
      for_each_vec(n, [&](int64_t j, auto tail) {
        Vec v = load(xr + j, tail);
        if constexpr (decltype(has_smooth)::value) v = v * load(smooth + j, tail);
        store(s + j, v, tail);
        m = absmax(m, v);
      });
      const float amax = reduce_absmax(m);
      scale[r] = amax / dmax;
      const Vec mul = set1(dynamic_mul(amax, dmax));
      const bool next = r + 1 < rows;
      quant_row(n, -dmax - 1.0f, dmax, y8 != nullptr ? y8 + r * n : nullptr,
                y4 != nullptr ? y4 + r * (n / 8) : nullptr, qbuf.data,
                [&](int64_t j, auto tail) {
                  if (next) prefetch_row_part(xr + n, j);
                  return load(s + j, tail) * mul;
                });
    }
  }, smooth != nullptr);
}

// max |x * smooth| over rows (per-tensor mode).
template <typename T, typename S>
float absmax_rows(const T* x, const S* smooth, int64_t rows, int64_t n) {
  float m = 0.0f;
  with_flags([&](auto has_smooth) {
    for (int64_t r = 0; r < rows; ++r) {
      float a = row_absmax<T, S, decltype(has_smooth)::value>(x + r * n, smooth, n);
      m = absmax1(m, a);
    }
  }, smooth != nullptr);
  return m;
}

// colmax[j] = max(colmax[j], max_r |x[r, j] * smooth[j]|) for the ncols columns starting at
// x (rows are ld apart): per-channel mode's reduction over dim -2.
template <typename T, typename S>
void colmax_rows(const T* x, int64_t ld, const S* smooth, int64_t rows, int64_t ncols,
                 float* colmax) {
  with_flags([&](auto has_smooth) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * ld;
      for_each_vec(ncols, [&](int64_t j, auto tail) {
        Vec v = load(xr + j, tail);
        if constexpr (decltype(has_smooth)::value) v = v * load(smooth + j, tail);
        store(colmax + j, absmax(load(colmax + j, tail), v), tail);
      });
    }
  }, smooth != nullptr);
}

// y = rint(x * smooth * mul) with mul one value (per tensor, colmul null) or one per
// column (per channel); int8 (y8) or int4 packed (y4).
template <typename T, typename S>
void quant_rows_mul(const T* x, const S* smooth, float mul, const float* colmul, int8_t* y8,
                    int32_t* y4, int64_t rows, int64_t n, float dmax) {
  RowBuffer<int8_t> qbuf(y8 != nullptr ? 0 : n);
  const Vec vmul = set1(mul);
  with_flags([&](auto has_smooth, auto per_col) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      quant_row(n, -dmax - 1.0f, dmax, y8 != nullptr ? y8 + r * n : nullptr,
                y4 != nullptr ? y4 + r * (n / 8) : nullptr, qbuf.data,
                [&](int64_t j, auto tail) {
                  Vec v = load(xr + j, tail);
                  if constexpr (decltype(has_smooth)::value) v = v * load(smooth + j, tail);
                  if constexpr (decltype(per_col)::value) return v * load(colmul + j, tail);
                  else return v * vmul;
                });
    }
  }, smooth != nullptr, colmul != nullptr);
}

// Static quantisation, out = rint(x / s + zp) (div) or rint(x * s + zp), saturated to
// [lo, hi]. Per column: s and zp hold n values (the last axis). O is int8_t, uint8_t or
// int32_t; with out4 non-null (int4) the int8 results are packed 8 per int32 instead.
template <typename T, typename O>
void quantize_rows_percol(const T* x, const float* s, const float* zp, bool div, O* out,
                          int32_t* out4, int64_t rows, int64_t n, float lo, float hi) {
  RowBuffer<int8_t> qbuf(out4 != nullptr ? n : 0);
  const Vec vlo = set1(lo), vhi = set1(hi);
  with_flags([&](auto is_div, auto has_zp) {
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * n;
      O* dst = out4 != nullptr ? reinterpret_cast<O*>(qbuf.data) : out + r * n;
      for_each_vec(n, [&](int64_t j, auto tail) {
        Vec v = load(xr + j, tail);
        if constexpr (decltype(is_div)::value) v = v / load(s + j, tail);
        else v = v * load(s + j, tail);
        if constexpr (decltype(has_zp)::value) v = v + load(zp + j, tail);
        store_q(dst + j, v, vlo, vhi, tail);
      });
      if (out4 != nullptr) pack_int4_row(qbuf.data, out4 + r * (n / 8), n);
    }
  }, div, zp != nullptr);
}

// One contiguous run of len elements sharing a scale and zero point (the axis is not the
// last one, or there is a single scale). len must be a multiple of 8 for int4 output.
template <typename T, typename O>
void quantize_run(const T* x, float s, float zp, bool div, O* out, int32_t* out4, int64_t len,
                  float lo, float hi) {
  const Vec vs = set1(s), vzp = set1(zp), vlo = set1(lo), vhi = set1(hi);
  // int4 goes through a stack chunk of int8 (a multiple of 8 and of Vec::N)
  constexpr int64_t kChunk = 1024;
  alignas(64) int8_t qbuf[kChunk];
  with_flags([&](auto is_div) {
    for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
      const int64_t m = len - c0 < kChunk ? len - c0 : kChunk;
      O* dst = out4 != nullptr ? reinterpret_cast<O*>(qbuf) : out + c0;
      for_each_vec(m, [&](int64_t j, auto tail) {
        Vec v = load(x + c0 + j, tail);
        if constexpr (decltype(is_div)::value) v = v / vs;
        else v = v * vs;
        store_q(dst + j, v + vzp, vlo, vhi, tail);
      });
      if (out4 != nullptr) pack_int4_row(qbuf, out4 + c0 / 8, m);
    }
  }, div);
}
