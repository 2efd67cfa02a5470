// Body of kernels/kv_rmsnorm_rope.h, compiled once per instruction set. The arithmetic of
// op_sdk/ops/kv_rmsnorm_rope_cache.py (values): c_kv = x / sqrt(sum(x^2) * recip + eps) *
// gamma (a division, as CANN's kernel; the sum of squares in this kernel's lane order),
// k_rope = A * c + B * s with A = cat(x[0::2], x[1::2]), B = cat(-x[1::2], x[0::2]) (each
// product and the sum rounded once: the reference's bits); int8 rows by store_q (round half
// to even, saturated, NaN 0) of the float32 value times the scale.

template <typename T>
void kv_rmsnorm_rope_row(const T* x, const float* g, const T* c, const T* s, T* c_kv,
                         T* k_rope, int8_t* vq, const float* vs, int8_t* kq, const float* ks,
                         int64_t dv, int64_t dk, float recip, float eps, float* scratch) {
  Vec acc = set1(0.f);
  for_each_vec(dv, [&](int64_t j, auto tail) {
    const Vec v = load(x + j, tail);
    acc = acc + v * v;
  });
  const Vec rms = set1(std::sqrt(reduce_add(acc) * recip + eps));
  const Vec lo = set1(-128.f), hi = set1(127.f);
  for_each_vec(dv, [&](int64_t j, auto tail) {
    const Vec y = load(x + j, tail) / rms * load(g + j, tail);
    store(c_kv + j, y, tail);
    if (vq != nullptr) store_q(vq + j, y * load(vs + j, tail), lo, hi, tail);
  });
  const int64_t h = dk / 2;
  const T* r = x + dv;
  float* a = scratch;
  float* b = scratch + dk;
  for (int64_t k = 0; k < h; ++k) {
    const float e = to_float(r[2 * k]), o = to_float(r[2 * k + 1]);
    a[k] = e;
    a[h + k] = o;
    b[k] = -o;
    b[h + k] = e;
  }
  for_each_vec(dk, [&](int64_t j, auto tail) {
    const Vec y = load(a + j, tail) * load(c + j, tail) + load(b + j, tail) * load(s + j, tail);
    store(k_rope + j, y, tail);
    if (kq != nullptr) store_q(kq + j, y * load(ks + j, tail), lo, hi, tail);
  });
}
