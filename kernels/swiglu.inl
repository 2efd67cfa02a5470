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

// npu_dequant_swiglu_quant over rows of 2n, the steps of op_sdk/ops/dequant_swiglu_quant.py's
// reference: (1) the row dequantised into u: an int32 bias added in int32 (wrapping), the
// float32 value times weight_scale, times the row's activation scale, plus a float bias
// (float x: its values); mode 1 then splits u into its even / odd elements. (2) t = silu(A)
// * B (mode 0) or ClippedGlu(A, B) (modes 1, 2), A the half `left` picks; dynamic: t *=
// quant_scale, scale = max|t| / 127, y = rint(t * (127 / max|t|)); static: t = t /
// quant_scale + quant_offset, scale 0, y = rint(t). Saturated, a NaN stores 0 (store_q).
template <typename T>
void dequant_swiglu_quant_rows(const T* x, int64_t rows, int64_t n,
                               const DequantSwigluQuantParams& p, int8_t* y, float* scale) {
  const int64_t d = 2 * n;
  RowBuffer<float> ubuf(p.mode == 1 ? 2 * d : d);
  RowBuffer<float> sbuf(n);
  RowBuffer<int32_t> ibuf(p.bias_int != nullptr ? d : 1);
  float* u = ubuf.data;
  float* w = p.mode == 1 ? u + d : u;  // the even / odd split of u (mode 1)
  float* s = sbuf.data;
  const Vec lo = set1(-128.0f), hi = set1(127.0f);
  const ClippedGlu clip(p.alpha, p.limit, p.glu_bias);
  const Vec qs1 = set1(p.quant_scale != nullptr ? p.quant_scale[0] : 1.0f);
  const Vec qo1 = set1(p.quant_offset != nullptr ? p.quant_offset[0] : 0.0f);
  const float* A = p.mode == 1 ? w : (p.left ? u : u + n);
  const float* B = p.mode == 1 ? w + n : (p.left ? u + n : u);
  with_flags([&](auto k_ws, auto k_act, auto k_bias_f, auto k_clip, auto k_qs, auto k_qo) {
    constexpr bool kWs = decltype(k_ws)::value, kAct = decltype(k_act)::value;
    constexpr bool kBiasF = decltype(k_bias_f)::value, kClip = decltype(k_clip)::value;
    constexpr bool kQs = decltype(k_qs)::value, kQo = decltype(k_qo)::value;
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + r * d;
      if constexpr (std::is_same_v<T, int32_t>) {
        if (p.bias_int != nullptr) {
          int32_t* ib = ibuf.data;
          for (int64_t j = 0; j < d; ++j)
            ib[j] = int32_t(uint32_t(xr[j]) + uint32_t(p.bias_int[j]));
          xr = ib;
        }
      }
      const Vec act = set1(kAct ? p.act_scale[r] : 1.0f);
      for_each_vec(d, [&](int64_t j, auto tail) {
        Vec v = load(xr + j, tail);
        if constexpr (kWs) v = v * load(p.weight_scale + j, tail);
        if constexpr (kAct) v = v * act;
        if constexpr (kBiasF) v = v + load(p.bias_float + j, tail);
        store(u + j, v, tail);
      });
      if (p.mode == 1) {
        for (int64_t j = 0; j < n; ++j) {
          w[j] = u[2 * j];
          w[n + j] = u[2 * j + 1];
        }
      }
      Vec m = zero();
      for_each_vec(n, [&](int64_t j, auto tail) {
        const Vec va = load(A + j, tail), vb = load(B + j, tail);
        Vec t;
        if constexpr (kClip) t = clip(va, vb);
        else t = silu(va) * vb;
        if (p.dynamic) {
          if constexpr (kQs) t = t * load(p.quant_scale + j, tail);
        } else {
          if constexpr (kQs) t = t / (p.quant_scale_per_channel ? load(p.quant_scale + j, tail) : qs1);
          if constexpr (kQo) t = t + (p.quant_offset_per_channel ? load(p.quant_offset + j, tail) : qo1);
        }
        store(s + j, t, tail);
        m = absmax(m, t);
      });
      int8_t* yr = y + r * n;
      if (p.dynamic) {
        const float amax = reduce_absmax(m);
        scale[r] = amax / 127.0f;
        const Vec vmul = set1(127.0f / amax);
        for_each_vec(n, [&](int64_t j, auto tail) {
          store_q(yr + j, load(s + j, tail) * vmul, lo, hi, tail);
        });
      } else {
        scale[r] = 0.0f;
        for_each_vec(n, [&](int64_t j, auto tail) { store_q(yr + j, load(s + j, tail), lo, hi, tail); });
      }
    }
  }, p.weight_scale != nullptr, p.act_scale != nullptr, p.bias_float != nullptr, p.mode != 0,
     p.quant_scale != nullptr, p.quant_offset != nullptr);
}
