// Row kernels of npu_add_rms_norm_quant and npu_add_rms_norm_dynamic_quant. Body of
// kernels/norm_quant.h, compiled once per instruction set; uses the row helpers of
// rms_norm.inl and quant.inl (same namespace). fp32 math, no intermediate rounding.

// x = x1 + x2 -> scratch (xo = x rounded); y = x * rstd * gamma (+ beta);
// y_i = rint(y / scales_i + zp_i) (div) or rint(y * scales_i + zp_i), saturated int8.
// y2 is all zeros when scales2 is absent.
template <typename T>
void add_rms_norm_quant_rows(const AddRmsNormQuantParams<T>& p, int64_t r0, int64_t r1) {
  const int64_t n = p.n;
  RowBuffer<float> buf(n);
  float* s = buf.data;
  const Vec lo = set1(-128.0f), hi = set1(127.0f);
  with_flags([&](auto is_div, auto has_beta, auto has_zp1, auto has_b2, auto has_zp2,
                 auto stream) {
    constexpr bool kStream = decltype(stream)::value;
    auto quant = [&](Vec y, const float* sc, const float* zp, auto has_zp, int64_t j, auto tail) {
      Vec v;
      if constexpr (decltype(is_div)::value) v = y / load(sc + j, tail);
      else v = y * load(sc + j, tail);
      if constexpr (decltype(has_zp)::value) v = v + load(zp + j, tail);
      return v;
    };
    for (int64_t r = r0; r < r1; ++r) {
      const float rs = rstd_from_sumsq(
          add_row_sumsq<kStream>(p.x1 + r * n, p.x2 + r * n, s, p.xo + r * n, n), n, p.eps);
      const Vec vr = set1(rs);
      const bool next = r + 1 < r1;
      int8_t* y1 = p.y1 + r * n;
      int8_t* y2 = p.y2 + r * n;
      for_each_vec(n, [&](int64_t j, auto tail) {
        if (next) {
          prefetch_row_part(p.x1 + (r + 1) * n, j);
          prefetch_row_part(p.x2 + (r + 1) * n, j);
        }
        Vec y = load(s + j, tail) * vr * load(p.gamma + j, tail);
        if constexpr (decltype(has_beta)::value) y = y + load(p.beta + j, tail);
        put_q<kStream>(y1 + j, quant(y, p.scales1, p.zp1, has_zp1, j, tail), lo, hi, tail);
        if constexpr (decltype(has_b2)::value)
          put_q<kStream>(y2 + j, quant(y, p.scales2, p.zp2, has_zp2, j, tail), lo, hi, tail);
      });
      if constexpr (!decltype(has_b2)::value) {
        if (!p.y2_zero_filled) std::memset(y2, 0, size_t(n));
      }
    }
    if constexpr (kStream) store_fence();  // order the streamed stores before the join
  }, p.div_mode, p.beta != nullptr, p.zp1 != nullptr, p.scales2 != nullptr, p.zp2 != nullptr,
     p.stream);
}

// x = x1 + x2 -> scratch (xo = x rounded); y = x * rstd * gamma (+ beta), kept in fp32;
// branch i: in_i = y * smooth_i, scale_i = max|in_i| / 127, y_i = rint(in_i * (127 / max)).
// A branch runs when its y_i is non-null; an absent smooth scale multiplies by one.
template <typename T>
void add_rms_norm_dynamic_quant_rows(const AddRmsNormDynamicQuantParams<T>& p, int64_t r0,
                                     int64_t r1) {
  const int64_t n = p.n;
  RowBuffer<float> buf(n);
  float* s = buf.data;
  // gamma, beta and the smooth scales up-cast once per call (not once per row); ones stand
  // in for an absent smooth scale of a running branch (x * 1 is exact)
  const bool b1 = p.y1 != nullptr, b2 = p.y2 != nullptr;
  RowBuffer<float> consts(n * (2 + int64_t(b1) + int64_t(b2)));
  float* gamma = consts.data;
  float* beta = gamma + n;
  float* sm1 = beta + n;
  float* sm2 = sm1 + (b1 ? n : 0);
  auto up_cast = [n](const T* src, float* dst) {
    for (int64_t j = 0; j < n; ++j) dst[j] = src != nullptr ? to_float(src[j]) : 1.0f;
  };
  up_cast(p.gamma, gamma);
  if (p.beta != nullptr) up_cast(p.beta, beta);
  if (b1) up_cast(p.smooth1, sm1);
  if (b2) up_cast(p.smooth2, sm2);
  const float dmax = 127.0f;
  const Vec lo = set1(-128.0f), hi = set1(127.0f);
  with_flags([&](auto has_beta, auto kb1, auto kb2, auto stream) {
    constexpr bool kB1 = decltype(kb1)::value, kB2 = decltype(kb2)::value;
    constexpr bool kStream = decltype(stream)::value;
    // one branch: the scratch row keeps its input y * smooth (pass 3 reads it as is)
    constexpr bool kOne = kB1 != kB2;
    const float* smo = kB1 ? sm1 : sm2;
    for (int64_t r = r0; r < r1; ++r) {
      // pass 1: read x1, x2 once; the fp32 sum stays in the scratch row
      const float rs = rstd_from_sumsq(
          add_row_sumsq<kStream>(p.x1 + r * n, p.x2 + r * n, s, p.xo + r * n, n), n, p.eps);
      const Vec vr = set1(rs);
      const bool next = r + 1 < r1;
      // pass 2: y in place, the row maxima; the next row's inputs are fetched meanwhile
      Vec m1 = zero(), m2 = zero();
      for_each_vec(n, [&](int64_t j, auto tail) {
        if (next) {
          prefetch_row_part(p.x1 + (r + 1) * n, j);
          prefetch_row_part(p.x2 + (r + 1) * n, j);
        }
        Vec y = load(s + j, tail) * vr * load(gamma + j, tail);
        if constexpr (decltype(has_beta)::value) y = y + load(beta + j, tail);
        if constexpr (kOne) {
          const Vec in = y * load(smo + j, tail);
          store(s + j, in, tail);
          m1 = absmax(m1, in);
        } else {
          store(s + j, y, tail);
          if constexpr (kB1) m1 = absmax(m1, y * load(sm1 + j, tail));
          if constexpr (kB2) m2 = absmax(m2, y * load(sm2 + j, tail));
        }
      });
      if constexpr (kOne) m2 = m1;
      float a1 = 0.0f, a2 = 0.0f;
      if constexpr (kB1) {
        a1 = reduce_absmax(m1);
        p.scale1[r] = a1 / dmax;
      }
      if constexpr (kB2) {
        a2 = reduce_absmax(m2);
        p.scale2[r] = a2 / dmax;
      }
      // pass 3: quantise from the scratch row
      const Vec mul1 = set1(dynamic_mul(a1, dmax)), mul2 = set1(dynamic_mul(a2, dmax));
      for_each_vec(n, [&](int64_t j, auto tail) {
        Vec y = load(s + j, tail);
        if constexpr (kOne) {
          if constexpr (kB1) put_q<kStream>(p.y1 + r * n + j, y * mul1, lo, hi, tail);
          else put_q<kStream>(p.y2 + r * n + j, y * mul2, lo, hi, tail);
        } else {
          if constexpr (kB1)
            put_q<kStream>(p.y1 + r * n + j, y * load(sm1 + j, tail) * mul1, lo, hi, tail);
          if constexpr (kB2)
            put_q<kStream>(p.y2 + r * n + j, y * load(sm2 + j, tail) * mul2, lo, hi, tail);
        }
      });
    }
    if constexpr (kStream) store_fence();  // order the streamed stores before the join
  }, p.beta != nullptr, b1, b2, p.stream);
}

// Rows [r0, r1): x -> scratch fp32 (sum of squares), rstd; y = x * rstd * gamma + beta;
// v = fp16(y * inv_scale + offset); int8 saturated ([-128, 127]) or int4 ([-8, 7]), round
// half to even, NaN 0 (store_q).
template <typename T>
void rms_norm_quant_rows(const RmsNormQuantParams<T>& p, int64_t r0, int64_t r1) {
  const int64_t n = p.n;
  RowBuffer<float> buf(n);
  RowBuffer<int8_t> qbuf(p.y8 == nullptr ? n : 0);
  float* s = buf.data;
  const bool int4 = p.y8 == nullptr;
  const Vec lo = set1(int4 ? -8.0f : -128.0f), hi = set1(int4 ? 7.0f : 127.0f);
  const Vec inv = set1(p.inv_scale), off = set1(p.offset);
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = p.x + r * n;
    const Vec vr = set1(rstd_from_sumsq(load_row_sumsq(xr, s, n), n, p.eps));
    int8_t* q = int4 ? qbuf.data : p.y8 + r * n;
    const bool next = r + 1 < r1;
    for_each_vec(n, [&](int64_t j, auto tail) {
      if (next) prefetch_row_part(xr + n, j);
      Vec y = load(s + j, tail) * vr * load(p.gamma + j, tail) + load(p.beta + j, tail);
      // the float16 step before the integer store, as ops-nn's kernel casts to half
      store_q(q + j, round_fp16(y * inv + off), lo, hi, tail);
    });
    if (int4) pack_int4_row(qbuf.data, p.y4 + r * (n / 8), n);
  }
}
