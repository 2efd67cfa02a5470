// Row kernels of the MX quantisation operators. Body of kernels/mx_quant.h, compiled once
// per instruction set. The per-value loops are branch-free (selects on integers) so that the
// compiler vectorises them with that set's registers; the per-block parts are scalar.

// float8 bits of v (|v| <= the format's max): c10's Float8_e4m3fn / Float8_e5m2 rounding,
// half to even, subnormals by an fp32 addition; M mantissa bits, bias B; kNormal: |v| is at
// least the smallest normal
template <int M, int B, bool kNormal>
inline uint8_t mx_float8_bits(float v) {
  constexpr uint32_t kMinNormal = uint32_t(127 - B + 1) << 23;
  constexpr uint32_t kDenorm = uint32_t(127 - B + 1 + 23 - M) << 23;  // ulp = the subnormal step
  constexpr uint32_t kRebias = uint32_t(B - 127) << 23;  // wraps: modular arithmetic
  constexpr uint32_t kHalf = (uint32_t(1) << (22 - M)) - 1;
  const uint32_t all = mx_bits(v), sign = all & 0x80000000u, b = all ^ sign;
  const uint32_t nrm = (b + kRebias + kHalf + ((b >> (23 - M)) & 1)) >> (23 - M);
  if constexpr (kNormal) return static_cast<uint8_t>(nrm | (sign >> 24));
  const uint32_t sub = mx_bits(mx_float(b) + mx_float(kDenorm)) - kDenorm;
  return static_cast<uint8_t>((b < kMinNormal ? sub : nrm) | (sign >> 24));
}

// a float8 block's values: the normal-only form where no |w| is below the format's smallest
// normal (most blocks: values scaled towards the format's max)
template <int M, int B, bool kFull>
inline void mx_float8_block(const float* w, int64_t n, uint8_t* y) {
  const int64_t len = kFull ? kMxBlock : n;
  constexpr uint32_t kMinNormal = uint32_t(127 - B + 1) << 23;
  uint32_t lo = 0xFFFFFFFFu;
  for (int64_t j = 0; j < len; ++j) lo = std::min(lo, mx_bits(w[j]) & 0x7FFFFFFFu);
  if (lo >= kMinNormal) {
    for (int64_t j = 0; j < len; ++j) y[j] = mx_float8_bits<M, B, true>(w[j]);
  } else {
    for (int64_t j = 0; j < len; ++j) y[j] = mx_float8_bits<M, B, false>(w[j]);
  }
}

// float4 code of v by "rint" (half to even), saturated: e2m1 (one mantissa bit, bias 1,
// subnormal step 0.5) or e1m2 (the step 0.25 throughout); a zero keeps v's sign
template <bool kE2m1>
inline uint8_t mx_fp4_rint(float v) {
  const uint32_t all = mx_bits(v), sign = all & 0x80000000u;
  const float a = std::min(mx_float(all ^ sign), kE2m1 ? 6.0f : 1.75f);
  const uint32_t b = mx_bits(a);
  constexpr uint32_t kDenorm = kE2m1 ? uint32_t(127 + 22) << 23 : uint32_t(127 + 21) << 23;
  const uint32_t sub = mx_bits(a + mx_float(kDenorm)) - kDenorm;
  uint32_t code = sub;
  if constexpr (kE2m1) {
    const uint32_t nrm = (b - (uint32_t(126) << 23) + 0x1FFFFF + ((b >> 22) & 1)) >> 22;
    code = b < (uint32_t(127) << 23) ? sub : nrm;
  }
  return static_cast<uint8_t>(code | (sign >> 28));
}

// One block of len <= 32 fp32 values: its code into *scale, its values into y (float8: len
// bytes; float4: len / 2 bytes, len even). kFull: len is 32 (loops of a known trip count)
template <bool kFull>
inline void mx_quant_block(const float* v, int64_t n, uint8_t* y, uint8_t* scale,
                           const MxForm& f) {
  const int64_t len = kFull ? kMxBlock : n;
  uint32_t m = 0;  // the largest |v|'s bits: amax, and inf / NaN past 0x7F800000
  for (int64_t j = 0; j < len; ++j) m = std::max(m, mx_bits(v[j]) & 0x7FFFFFFFu);
  const bool fp4 = mx_fp4(f.dst);
  if (m >= 0x7F800000u) {  // an inf or a NaN: code 255, values 0
    *scale = 255;
    std::memset(y, 0, size_t(fp4 ? len / 2 : len));
    return;
  }
  const int code = mx_block_code(mx_float(m), f.dst, f.alg);
  *scale = static_cast<uint8_t>(code);
  const float factor = mx_factor(code, f.alg), top = mx_max(f.dst);
  alignas(64) float w[kMxBlock];
  for (int64_t j = 0; j < len; ++j) w[j] = std::min(std::max(v[j] * factor, -top), top);
  switch (f.dst) {
    case MxDst::e4m3:
      return mx_float8_block<3, 7, kFull>(w, len, y);
    case MxDst::e5m2:
      return mx_float8_block<2, 15, kFull>(w, len, y);
    default:
      break;
  }
  alignas(64) uint8_t c[kMxBlock];
  if (f.round != 0) {
    for (int64_t j = 0; j < len; ++j) c[j] = mx_fp4_code(w[j], f.dst, f.round);
  } else if (f.dst == MxDst::e2m1) {
    for (int64_t j = 0; j < len; ++j) c[j] = mx_fp4_rint<true>(w[j]);
  } else {
    for (int64_t j = 0; j < len; ++j) c[j] = mx_fp4_rint<false>(w[j]);
  }
  for (int64_t j = 0; j < len / 2; ++j)
    y[j] = static_cast<uint8_t>(c[2 * j] | (c[2 * j + 1] << 4));
}

// One row of n fp32 values in blocks of 32; the scale codes padded to pairs with 0
inline void mx_quant_row(const float* v, uint8_t* y, uint8_t* scale, int64_t n,
                         const MxForm& f) {
  const int64_t nb = (n + kMxBlock - 1) / kMxBlock;
  const bool fp4 = mx_fp4(f.dst);
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t j0 = b * kMxBlock, len = std::min(kMxBlock, n - j0);
    uint8_t* yb = y + (fp4 ? j0 / 2 : j0);
    if (len == kMxBlock) mx_quant_block<true>(v + j0, len, yb, scale + b, f);
    else mx_quant_block<false>(v + j0, len, yb, scale + b, f);
  }
  if (nb % 2) scale[nb] = 0;
}

template <typename T>
void mx_quant_rows(const T* x, uint8_t* y, uint8_t* scale, int64_t rows, int64_t n,
                   const MxForm& f) {
  RowBuffer<float> buf(std::is_same<T, float>::value ? 0 : n);
  const int64_t yr = mx_y_row(f.dst, n), sr = mx_scale_row(n);
  for (int64_t r = 0; r < rows; ++r) {
    const float* v;
    if constexpr (std::is_same<T, float>::value) {
      v = x + r * n;
    } else {
      const T* xr = x + r * n;
      for_each_vec(n, [&](int64_t j, auto tail) { store(buf.data + j, load(xr + j, tail), tail); });
      v = buf.data;
    }
    mx_quant_row(v, y + r * yr, scale + r * sr, n, f);
  }
}

// y rounded to T as a store to T rounds it
template <typename T>
inline Vec round_to(Vec v) {
  if constexpr (std::is_same<T, bf16>::value) return round_bf16(v);
  else return round_fp16(v);
}

template <typename T, typename G>
void norm_mx_quant_rows(const T* x1, const T* x2, const G* gamma, const G* beta, uint8_t* y,
                        uint8_t* scale, float* rstd, T* xo, int64_t rows, int64_t n, float eps,
                        const MxForm& f) {
  static_assert(!std::is_same<T, float>::value, "the fused MX norms take 16-bit x only");
  RowBuffer<float> buf(n);
  float* s = buf.data;
  const int64_t yr = mx_y_row(f.dst, n), sr = mx_scale_row(n);
  for (int64_t r = 0; r < rows; ++r) {
    const float ss = x2 != nullptr ? add_row_sumsq(x1 + r * n, x2 + r * n, s, xo + r * n, n)
                                   : load_row_sumsq(x1 + r * n, s, n);
    const float rs = rstd_from_sumsq(ss, n, eps);
    rstd[r] = rs;
    const Vec vr = set1(rs);
    for_each_vec(n, [&](int64_t j, auto tail) {
      Vec v = normed(load(s + j, tail), vr, load(gamma + j, tail));
      if (beta != nullptr) v = v + load(beta + j, tail);
      store(s + j, round_to<T>(v), tail);
    });
    mx_quant_row(s, y + r * yr, scale + r * sr, n, f);
  }
}
