// Body of kernels/swiglu.h, compiled once per instruction set. The formulas are the
// references' (op_sdk/ops/swiglu.py), in their order of operations: silu(a) = a / (1 +
// exp(-a)) and sigmoid(a) = 1 / (1 + exp(-a)), as torch's CPU kernels compute them.

// exp(x) in float32 (Cephes' expf scheme): n = round(x log2(e)), r = x - n ln(2) in two
// steps, a degree-7 polynomial, times 2^n. Not torch's exp bit for bit: the SwiGLU results
// stay within a few float32 ulps of the references' (tests/ops/test_swiglu.py,
// _KERNEL_TOL). +inf above 88.72; at x <= -87.34 the smallest normal (about 1.2e-38)
// instead of a subnormal or 0, which no caller here can tell apart (they add 1 to it);
// NaN stays NaN.
inline Vec exp(Vec x) {
  const Vec xc = max(x, set1(-87.3365478515625f));
  const Vec n = round_clamp(xc * set1(1.44269504088896341f), set1(-126.0f), set1(127.0f));
  Vec r = fma(n, set1(-0.693359375f), xc);
  r = fma(n, set1(2.12194440e-4f), r);
  Vec p = set1(1.9875691500e-4f);
  p = fma(p, r, set1(1.3981999507e-3f));
  p = fma(p, r, set1(8.3334519073e-3f));
  p = fma(p, r, set1(4.1665795894e-2f));
  p = fma(p, r, set1(1.6666665459e-1f));
  p = fma(p, r, set1(5.0000001201e-1f));
  p = fma(p, r * r, r + set1(1.0f));
  return select_nan(x, p * exp2i(n));
}

// silu(v) = v / (1 + exp(-v)) and sigmoid(v) = 1 / (1 + exp(-v)), torch's CPU formulas.
inline Vec silu(Vec v) { return v / (set1(1.0f) + exp(zero() - v)); }
inline Vec sigmoid(Vec v) { return set1(1.0f) / (set1(1.0f) + exp(zero() - v)); }

template <typename T>
void swiglu_span(const T* a, const T* b, T* y, int64_t n) {
  for_each_vec(n, [&](int64_t j, auto tail) {
    store(y + j, silu(load(a + j, tail)) * load(b + j, tail), tail);
  });
}

template <typename T>
void swiglu_backward_span(const T* g, const T* a, const T* b, T* da, T* db, int64_t n) {
  const Vec one = set1(1.0f);
  for_each_vec(n, [&](int64_t j, auto tail) {
    const Vec va = load(a + j, tail), vg = load(g + j, tail);
    const Vec s = sigmoid(va);
    store(da + j, vg * (s + s * (one - s) * va) * load(b + j, tail), tail);
    store(db + j, vg * s * va, tail);
  });
}

// npu_clipped_swiglu of one (a, b) lane set, the steps of its reference
// (op_sdk/ops/clipped_swiglu.py): a = min(a, limit), b = clamp(b, -limit, limit) + bias,
// y = b * (a / (exp(a * -alpha) + 1)). min / max take the limit first: the instructions
// return their second operand for a NaN lane, so a NaN propagates, as torch.clamp's.
struct ClippedGlu {
  Vec neg_alpha, limit, neg_limit, bias;
  ClippedGlu(float alpha, float lim, float b)
      : neg_alpha(set1(-alpha)), limit(set1(lim)), neg_limit(set1(-lim)), bias(set1(b)) {}
  Vec operator()(Vec a, Vec b) const {
    const Vec am = min(limit, a);
    const Vec bm = max(neg_limit, min(limit, b)) + bias;
    return bm * (am / (exp(am * neg_alpha) + set1(1.0f)));
  }
};

template <typename T>
void clipped_swiglu_span(const T* a, const T* b, T* y, int64_t n, float alpha, float limit,
                         float bias) {
  const ClippedGlu f(alpha, limit, bias);
  for_each_vec(n, [&](int64_t j, auto tail) {
    store(y + j, f(load(a + j, tail), load(b + j, tail)), tail);
  });
}

// y[j] = f(x[2j], x[2j + 1]): the pairs split into float blocks, then the vector steps
template <typename T>
void clipped_swiglu_pairs(const T* x, T* y, int64_t n, float alpha, float limit, float bias) {
  constexpr int64_t kBlock = 512;
  alignas(64) float ea[kBlock];
  alignas(64) float eb[kBlock];
  const ClippedGlu f(alpha, limit, bias);
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t m = n - j0 < kBlock ? n - j0 : kBlock;
    const T* p = x + 2 * j0;
    for (int64_t i = 0; i < m; ++i) {
      ea[i] = to_float(p[2 * i]);
      eb[i] = to_float(p[2 * i + 1]);
    }
    for_each_vec(m, [&](int64_t j, auto tail) {
      store(y + j0 + j, f(load(ea + j, tail), load(eb + j, tail)), tail);
    });
  }
}

// npu_swiglu_quant over rows of 2n: t = silu(a) b (left) or a silu(b), times smooth (n
// values per channel, or smooth[0] for the tensor), plus offset (the same forms; static
// mode only); dynamic: scale = 127 / max|t| (inf for an all-zero row), y = rint(t * scale);
// static: scale 0, y = rint(t). Saturated to [-128, 127], a NaN stores 0 (store_q). The
// order of operations is op_sdk/ops/swiglu_quant.py's reference.
template <typename T>
void swiglu_quant_rows(const T* x, int64_t rows, int64_t n, bool left, const float* smooth,
                       bool per_channel, const float* offset, bool dynamic, int8_t* y,
                       float* scale) {
  RowBuffer<float> buf(n);
  float* s = buf.data;
  const Vec lo = set1(-128.0f), hi = set1(127.0f);
  const Vec s1 = set1(smooth != nullptr ? smooth[0] : 1.0f);
  const Vec o1 = set1(offset != nullptr ? offset[0] : 0.0f);
  with_flags([&](auto k_left, auto k_smooth, auto k_per_channel, auto k_offset) {
    constexpr bool kLeft = decltype(k_left)::value, kSmooth = decltype(k_smooth)::value;
    constexpr bool kPerChannel = decltype(k_per_channel)::value;
    constexpr bool kOffset = decltype(k_offset)::value;
    for (int64_t r = 0; r < rows; ++r) {
      const T* a = x + r * 2 * n;
      const T* b = a + n;
      Vec m = zero();
      for_each_vec(n, [&](int64_t j, auto tail) {
        const Vec va = load(a + j, tail), vb = load(b + j, tail);
        Vec t;
        if constexpr (kLeft) t = silu(va) * vb;
        else t = va * silu(vb);
        if constexpr (kSmooth) {
          if constexpr (kPerChannel) t = t * load(smooth + j, tail);
          else t = t * s1;
        }
        if constexpr (kOffset) {
          if constexpr (kPerChannel) t = t + load(offset + j, tail);
          else t = t + o1;
        }
        store(s + j, t, tail);
        m = absmax(m, t);
      });
      int8_t* yr = y + r * n;
      if (dynamic) {
        const float mul = 127.0f / reduce_absmax(m);
        scale[r] = mul;
        const Vec vmul = set1(mul);
        for_each_vec(n, [&](int64_t j, auto tail) {
          store_q(yr + j, load(s + j, tail) * vmul, lo, hi, tail);
        });
      } else {
        scale[r] = 0.0f;
        for_each_vec(n, [&](int64_t j, auto tail) { store_q(yr + j, load(s + j, tail), lo, hi, tail); });
      }
    }
  }, left, smooth != nullptr, per_channel, offset != nullptr);
}
