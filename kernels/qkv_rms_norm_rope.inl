// Body of kernels/qkv_rms_norm_rope.h, compiled once per instruction set: the arithmetic of
// op_sdk/ops/qkv_rms_norm_rope_cache.py (op-plugin's golden). Norm: x / sqrt(sum(x^2) / d +
// eps) * gamma (the sum in this kernel's lane order); RoPE over the head's halves, y1 * c1 -
// y2 * s1 and y2 * c2 + y1 * s2 on the float32 norm (each product and the sum rounded once:
// the reference's bits given the norm's).

template <typename T>
void qk_head_norm_rope(const T* x, const float* g, const T* c, const T* s, T* y, float* y32,
                       int64_t d, float eps, float* scratch) {
  Vec acc = set1(0.f);
  for_each_vec(d, [&](int64_t j, auto tail) {
    const Vec v = load(x + j, tail);
    acc = acc + v * v;
  });
  const Vec rms = set1(std::sqrt(reduce_add(acc) / static_cast<float>(d) + eps));
  for_each_vec(d, [&](int64_t j, auto tail) {
    store(scratch + j, load(x + j, tail) / rms * load(g + j, tail), tail);
  });
  const int64_t h = d / 2;
  for_each_vec(h, [&](int64_t j, auto tail) {
    const Vec lo = load(scratch + j, tail), hi = load(scratch + h + j, tail);
    const Vec a = lo * load(c + j, tail) - hi * load(s + j, tail);
    const Vec b = hi * load(c + h + j, tail) + lo * load(s + h + j, tail);
    store(y + j, a, tail);
    store(y + h + j, b, tail);
    if (y32 != nullptr) {
      store(y32 + j, a, tail);
      store(y32 + h + j, b, tail);
    }
  });
}

template <typename V>
void quantize_divided(const V* v, const float* scale, const float* offset, int8_t* q,
                      int64_t n) {
  const Vec lo = set1(-128.f), hi = set1(127.f);
  for_each_vec(n, [&](int64_t j, auto tail) {
    Vec r = load(v + j, tail) / load(scale + j, tail);
    if (offset != nullptr) r = r + load(offset + j, tail);
    store_q(q + j, r, lo, hi, tail);
  });
}
