// Body of kernels/swiglu.h, compiled once per instruction set. The formulas are the
// references' (op_sdk/ops/swiglu.py), in their order of operations: silu(a) = a / (1 +
// exp(-a)) and sigmoid(a) = 1 / (1 + exp(-a)), as torch's CPU kernels compute them.

// exp(x) in float32 (Cephes' expf scheme): n = round(x log2(e)), r = x - n ln(2) in two
// steps, a degree-7 polynomial, times 2^n. Within 2 ulp of expf where the result is a
// normal float; +inf above 88.72; at x <= -87.34 the smallest normal (about 1.2e-38)
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

template <typename T>
void swiglu_span(const T* a, const T* b, T* y, int64_t n) {
  const Vec one = set1(1.0f);
  for_each_vec(n, [&](int64_t j, auto tail) {
    const Vec va = load(a + j, tail);
    const Vec silu = va / (one + exp(zero() - va));
    store(y + j, silu * load(b + j, tail), tail);
  });
}

template <typename T>
void swiglu_backward_span(const T* g, const T* a, const T* b, T* da, T* db, int64_t n) {
  const Vec one = set1(1.0f);
  for_each_vec(n, [&](int64_t j, auto tail) {
    const Vec va = load(a + j, tail), vg = load(g + j, tail);
    const Vec s = one / (one + exp(zero() - va));
    store(da + j, vg * (s + s * (one - s) * va) * load(b + j, tail), tail);
    store(db + j, vg * s * va, tail);
  });
}
