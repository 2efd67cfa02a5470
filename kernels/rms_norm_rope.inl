// Body of kernels/rms_norm_rope.h, compiled once per instruction set after the bodies of
// rms_norm.inl and rotary.inl (same namespace): the norm row is rms_norm.inl's norm_row, the
// rotation rotary.inl's rotate_halves; the normalised row stays in L1 between the two.

template <typename T, typename G>
void rms_norm_rope_rows(const T* x, int64_t x_stride, const G* gamma, const T* c, const T* s,
                        int64_t cs_stride, T* y, int64_t rows, int64_t d, float eps,
                        float* scratch, T* normed) {
  for (int64_t r = 0; r < rows; ++r) {
    norm_row(x + r * x_stride, gamma, normed, scratch, d, eps);
    rotate_halves(normed, c + r * cs_stride, s + r * cs_stride, y + r * d, d / 2);
  }
}
