// Body of kernels/rotary.h, compiled once per instruction set. Each mode is the
// permutation-with-signs of op_sdk/ops/rotary_mul.py (rotation): B(x)[i] = sign[i] *
// x[perm[i]]. The sign is applied as a subtraction (a * c - u * s is a * c + (-u) * s bit
// for bit), products and sums rounded once each (no fma), as the reference computes them.

// An output store: non-temporal for whole vectors when kStream (op_sdk::rms_norm_rope's
// launcher asks for it on large aligned outputs).
template <bool kStream, typename T, typename Tail>
inline void put_rotated(T* p, Vec v, Tail tail) {
  if constexpr (kStream && std::is_same<Tail, Full>::value) store_stream(p, v);
  else store(p, v, tail);
}

// "half" on one segment of 2h elements: y[j] = x[j] c[j] - x[j+h] s[j],
// y[j+h] = x[j+h] c[j+h] + x[j] s[j+h], with the halves' vectors from xv(j, tail, second)
// (op_sdk::rms_norm_rope computes them in registers). c / s: rows of T, or of float holding
// T's values (rms_norm_rope converts a cos / sin row its rows share once).
template <bool kStream = false, typename T, typename C, typename X>
inline void rotate_halves_of(X&& xv, const C* c, const C* s, T* y, int64_t h) {
  for_each_vec(h, [&](int64_t j, auto tail) {
    const Vec lo = xv(j, tail, false), hi = xv(j, tail, true);
    put_rotated<kStream>(y + j, lo * load(c + j, tail) - hi * load(s + j, tail), tail);
    put_rotated<kStream>(y + h + j, hi * load(c + h + j, tail) + lo * load(s + h + j, tail), tail);
  });
}

template <typename T>
inline void rotate_halves(const T* x, const T* c, const T* s, T* y, int64_t h) {
  rotate_halves_of([&](int64_t j, auto tail, bool second) { return load(x + (second ? h : 0) + j, tail); },
                   c, s, y, h);
}

// y = a * c + b * s, a / b float rows.
template <typename T>
inline void combine(const float* a, const float* b, const T* c, const T* s, T* y, int64_t d) {
  for_each_vec(d, [&](int64_t j, auto tail) {
    store(y + j, load(a + j, tail) * load(c + j, tail) + load(b + j, tail) * load(s + j, tail),
          tail);
  });
}

template <typename T>
void rotary_row(const T* x, const T* c, const T* s, T* y, int64_t d, int mode,
                float* scratch) {
  const int64_t h = d / 2;
  if (mode == kRotaryHalf) {
    rotate_halves(x, c, s, y, h);
  } else if (mode == kRotaryQuarter) {  // cat(-x2, x1, -x4, x3): "half" on each half
    rotate_halves(x, c, s, y, h / 2);
    rotate_halves(x + h, c + h, s + h, y + h, h / 2);
  } else {
    float* a = scratch;
    float* b = scratch + d;
    if (mode == kRotaryInterleave) {  // A = x; B[2k] = -x[2k+1], B[2k+1] = x[2k]
      for (int64_t k = 0; k < h; ++k) {
        const float e = to_float(x[2 * k]), o = to_float(x[2 * k + 1]);
        a[2 * k] = e;
        a[2 * k + 1] = o;
        b[2 * k] = -o;
        b[2 * k + 1] = e;
      }
    } else {  // interleave-half: A = cat(x[0::2], x[1::2]), B = cat(-x[1::2], x[0::2])
      for (int64_t k = 0; k < h; ++k) {
        const float e = to_float(x[2 * k]), o = to_float(x[2 * k + 1]);
        a[k] = e;
        a[h + k] = o;
        b[k] = -o;
        b[h + k] = e;
      }
    }
    combine(a, b, c, s, y, d);
  }
}

template <typename T>
void rotary_rows(const T* x, const T* c, const T* s, int64_t cs_stride, T* y, int64_t rows,
                 int64_t d, int mode, float* scratch) {
  for (int64_t r = 0; r < rows; ++r)
    rotary_row(x + r * d, c + r * cs_stride, s + r * cs_stride, y + r * d, d, mode, scratch);
}
