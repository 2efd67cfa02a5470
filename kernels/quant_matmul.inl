// Body of the npu_quant_matmul epilogue, compiled once per instruction set by
// isa_expand.h (see quant_matmul.h). Each step is one rounded fp32 operation, in the order
// of the contract (the build's -ffp-contract=off keeps a * b + c two roundings).

template <typename O>
void quant_matmul_epilogue_row(const int32_t* acc, const float* scale, bool scale_vec,
                               float pertoken, const float* bias, const float* offset,
                               bool offset_vec, O* out, int64_t n) {
  const Vec s0 = set1(scale[0]), pt = set1(pertoken);
  const Vec o0 = set1(offset != nullptr ? offset[0] : 0.0f);
  const Vec lo = set1(-128.0f), hi = set1(127.0f), s9lo = set1(-256.0f), s9hi = set1(255.0f);
  for_each_vec(n, [&](int64_t j, auto cnt) {
    Vec v = load(acc + j, cnt);
    v = v * (scale_vec ? load(scale + j, cnt) : s0);
    v = v * pt;  // x * 1.0f is exact: no branch for "no pertoken_scale"
    if constexpr (std::is_same_v<O, int8_t>) {
      // CANN's requantisation: the value rounded to s9 (a NaN lane taking -256), plus the
      // (s9) offset, saturated
      v = round_clamp(v, s9lo, s9hi);
      if (offset != nullptr) v = v + (offset_vec ? load(offset + j, cnt) : o0);
      store_q(out + j, v, lo, hi, cnt);
    } else {
      if (bias != nullptr) v = v + load(bias + j, cnt);
      store(out + j, v, cnt);
    }
  });
}
