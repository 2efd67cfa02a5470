// The int8 operator shared by npu_quant_matmul (csrc/quant_matmul.cpp) and
// quant_matmul_packed (csrc/quant_matmul_packed.cpp): its checks (check_quant_matmul, the
// rules of op_sdk/ops/_quant_matmul_common.py in the same words), the exact int32 product
// (int8_product: the kernels of kernels/quant_matmul.h, kernels/quant_matmul_amx.h and
// kernels/quant_matmul_avx2.h, kernels/quant_matmul_packed.h, or ATen's int8 GEMM) and the dequantisation epilogue of
// kernels/quant_matmul.h, per (broadcast) batch (quant_matmul_impl).
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "checks.h"
#include "launch.h"
#include "quant_matmul.h"
#include "quant_matmul_amx.h"
#include "quant_matmul_avx2.h"
#include "quant_matmul_packed.h"

namespace opsdk {

// the output_dtype codes
inline constexpr int64_t kInt8 = 1, kInt32 = 3, kFloat16 = 5, kBFloat16 = 15;

// TORCH_CHECK_NOT_IMPLEMENTED (NotImplementedError) naming `op` and the argument: outside
// the supported subset.
#define QMM_UNSUPPORTED(cond, arg, ...) \
  TORCH_CHECK_NOT_IMPLEMENTED((cond), op, ": argument '", arg, "' ", __VA_ARGS__)

// The optional arguments outside the supported subset: each must be None.
inline void check_none_outside_subset(
    const char* op, std::initializer_list<std::pair<const char*, bool>> given) {
  for (const auto& [name, is_given] : given)
    QMM_UNSUPPORTED(!is_given, name, "is outside the supported subset (must be None)");
}

// The (m, k) x (k, n) product's shapes: at least 2 dims each, the same k, batch dims that
// broadcast. Returns {m, n}.
inline void check_batch_broadcast(const char* op, const at::Tensor& x1, const at::Tensor& x2) {
  const auto b1 = x1.sizes().slice(0, x1.dim() - 2), b2 = x2.sizes().slice(0, x2.dim() - 2);
  bool broadcasts = true;
  for (int64_t i = 1; i <= std::min<int64_t>(b1.size(), b2.size()); ++i) {
    const int64_t p = b1[b1.size() - i], q = b2[b2.size() - i];
    broadcasts = broadcasts && (p == q || p == 1 || q == 1);
  }
  OPK_CHECK(broadcasts, op, "x2", "batch dims must broadcast with x1's: ", shape_str(b1),
            " vs ", shape_str(b2));
}
inline std::pair<int64_t, int64_t> check_matmul_shapes(const char* op, const at::Tensor& x1,
                                                       const at::Tensor& x2) {
  OPK_CHECK(x1.dim() >= 2, op, "x1", "must have at least 2 dims (m, k), got ", x1.dim());
  OPK_CHECK(x2.dim() >= 2, op, "x2", "must have at least 2 dims (k, n), got ", x2.dim());
  const int64_t k = x1.size(-1), k2 = x2.size(-2);
  OPK_CHECK(k == k2, op, "x2", "must have k = ", k, " rows (x1 is (m, k)), got ", k2);
  check_batch_broadcast(op, x1, x2);
  return {x1.size(-2), x2.size(-1)};
}

// bias (n,), or (batch, 1, n) with a 3-D output: one bias row per batch (torch_npu's
// documented form); _check_bias_shape of op_sdk/ops/_quant_matmul_common.py.
inline void check_bias_shape(const char* op, const at::Tensor& x1, const at::Tensor& x2,
                             const at::Tensor& bias, int64_t n) {
  const std::vector<int64_t> batch =
      at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  if (bias.dim() == 3) {
    OPK_CHECK(batch.size() == 1 && bias.size(0) == batch[0] && bias.size(1) == 1 &&
                  bias.size(2) == n,
              op, "bias", "of 3 dims must have shape (batch, 1, n) = (",
              batch.size() == 1 ? std::to_string(batch[0]) : std::string("batch"), ", 1, ", n,
              ") with a 3-D output (batch dims ", shape_str(batch), "), got ",
              shape_str(bias.sizes()));
  } else {
    OPK_CHECK(bias.dim() == 1 && bias.size(0) == n, op, "bias", "must have shape (n,) = (", n,
              ",) or (batch, 1, n), got ", shape_str(bias.sizes()));
  }
}

inline int64_t check_quant_matmul(const char* op, const at::Tensor& x1, const at::Tensor& x2,
                                  const at::Tensor& scale,
                                  const std::optional<at::Tensor>& offset,
                                  const std::optional<at::Tensor>& pertoken,
                                  const std::optional<at::Tensor>& bias,
                                  std::optional<int64_t> output_dtype, bool x1_dtype,
                                  bool x2_dtype, bool pertoken_scale_dtype, bool scale_dtype,
                                  bool group_sizes, bool y_scale) {
  check_none_outside_subset(op, {{"x1_dtype", x1_dtype}, {"x2_dtype", x2_dtype},
                                 {"pertoken_scale_dtype", pertoken_scale_dtype},
                                 {"scale_dtype", scale_dtype}, {"group_sizes", group_sizes},
                                 {"y_scale", y_scale}});
  QMM_UNSUPPORTED(x1.scalar_type() == at::kChar, "x1",
                  "must be int8 (the supported subset), got ", dtype_name(x1.scalar_type()));
  QMM_UNSUPPORTED(x2.scalar_type() == at::kChar, "x2",
                  "must be int8 (the supported subset), got ", dtype_name(x2.scalar_type()));
  const int64_t code =
      dtype_arg(op, "output_dtype", output_dtype, {kInt8, kInt32, kFloat16, kBFloat16}, kInt8);
  const auto [m, n] = check_matmul_shapes(op, x1, x2);
  OPK_CHECK(scale.dim() == 1 && (scale.size(0) == 1 || scale.size(0) == n), op, "scale",
            "must have shape (1,) or (n,) = (", n, ",), got ", shape_str(scale.sizes()));
  const bool packed = scale.scalar_type() == at::kLong || scale.scalar_type() == at::kUInt64;
  OPK_CHECK(packed || scale.scalar_type() == at::kFloat || scale.scalar_type() == at::kBFloat16,
            op, "scale",
            "must be float32, bfloat16, or int64 / uint64 (npu_trans_quant_param's packed "
            "value), got ",
            dtype_name(scale.scalar_type()));
  if (packed) {  // the int64-scale rules and their sources: op_sdk/ops/_quant_matmul_common.py
    OPK_CHECK(code != kInt32, op, "output_dtype",
              "must be int8, float16 or bfloat16 with an int64 / uint64 scale, got int32");
    QMM_UNSUPPORTED(!pertoken.has_value(), "pertoken_scale",
                    "with an int64 / uint64 scale is outside the supported subset (CANN "
                    "documents a per-token scale with a float32 scale only)");
  }
  if (scale.scalar_type() == at::kBFloat16)
    OPK_CHECK(code == kBFloat16 || code == kInt32, op, "output_dtype",
              "must be bfloat16 or int32 with a bfloat16 scale, got ", dtype_value_str(code));
  if (pertoken.has_value()) {
    OPK_CHECK(pertoken->scalar_type() == at::kFloat, op, "pertoken_scale",
              "must be float32, got ", dtype_name(pertoken->scalar_type()));
    OPK_CHECK(pertoken->dim() == 1 && pertoken->size(0) == m, op, "pertoken_scale",
              "must have shape (m,) = (", m, ",), got ", shape_str(pertoken->sizes()));
    QMM_UNSUPPORTED(code == kFloat16 || code == kBFloat16, "pertoken_scale",
                    "requires output_dtype float16 or bfloat16");
  }
  if (offset.has_value()) {
    QMM_UNSUPPORTED(code == kInt8, "offset", "requires output_dtype int8");
    OPK_CHECK(offset->scalar_type() == at::kFloat && offset->dim() == 1 &&
                  (offset->size(0) == 1 || offset->size(0) == n),
              op, "offset", "must be float32 of shape (1,) or (", n, ",), got ",
              dtype_name(offset->scalar_type()), " ", shape_str(offset->sizes()));
  }
  if (bias.has_value()) {
    check_bias_shape(op, x1, x2, *bias, n);
    if (is_float_dtype(bias->scalar_type())) {
      QMM_UNSUPPORTED(pertoken.has_value(), "bias", "of a float dtype requires pertoken_scale");
    } else {
      OPK_CHECK(bias->scalar_type() == at::kInt, op, "bias",
                "must be int32, or float16 / bfloat16 / float32 with pertoken_scale, got ",
                dtype_name(bias->scalar_type()));
    }
  }
  return code;
}

// most rows for the AVX-512 VNNI kernel on an unpacked (n, k) weight: its measured
// crossover with AMX (3) or, on a CPU without AMX, with ATen's int8 GEMM (8)
inline int64_t vnni_max_m() {
  static const int64_t v = env_limit("OP_SDK_QMM_VNNI_MAX_M", opk::amx_available() ? 3 : 8);
  return v;
}
// most rows for the kernels on a packed weight; the default is each kernel's measured
// crossover with ATen's GEMM: AVX-512 VNNI (with or without AMX) 64, AVX-VNNI 32, AVX2 12
inline int64_t packed_max_m() {
  static const int64_t v = env_limit("OP_SDK_QMM_PACKED_MAX_M",
                                     opk::use_avx512() ? 64 : opk::use_avx_vnni() ? 32 : 12);
  return v;
}
inline int64_t amx_max_m() {
  static const int64_t v = std::min<int64_t>(64, env_limit("OP_SDK_QMM_AMX_MAX_M", 32));
  return v;
}
// most rows for the AVX-VNNI / AVX2 kernels (kernels/quant_matmul_avx2.h) on an unpacked
// weight, where no AVX-512 path is in use; by default their measured crossover with
// ATen's GEMM (oneDNN capped at AVX2_VNNI / AVX2): 16 with AVX-VNNI, 12 with AVX2
inline int64_t avx2_max_m() {
  static const int64_t v = env_limit("OP_SDK_QMM_AVX2_MAX_M", opk::use_avx_vnni() ? 16 : 12);
  return v;
}

// x2 (k, n) is the transpose of a row-major (n, k) matrix: element (kk, j) at j * ld + kk.
inline bool is_transposed_rows(const at::Tensor& x2) {
  return x2.size(0) <= 1 || x2.stride(0) == 1;
}

// ATen's int8 GEMM (at::_int_mm_out) reads its operands through BLAS leading dimensions and
// leaves the output unwritten for layouts it cannot express (a stride-0 operand, a (1, k)
// row with strides (1, 1)): it is handed a row-major a and a row- or column-major b, others
// copied first. Row-major: unit stride along dim 1 and a leading stride of at least the row.
inline bool blas_rows(const at::Tensor& t) {
  return t.stride(1) == 1 && t.stride(0) >= std::max<int64_t>(1, t.size(1));
}
inline bool blas_cols(const at::Tensor& t) {
  return t.stride(0) == 1 && t.stride(1) >= std::max<int64_t>(1, t.size(0));
}
// a copy with standard strides (.contiguous() keeps a tensor whose only odd strides are on
// size-1 dims)
inline at::Tensor dense_copy(const at::Tensor& t) {
  return at::empty(t.sizes(), t.options()).copy_(t);
}

// The int8 GEMM kernels of int8_product.
enum class Int8Gemm { aten, vnni512, amx, avx_vnni, avx2 };

// Which kernel int8_product runs for m rows: on a packed weight (packed), or in place on
// an (n, k) row-major weight (nk) or another layout.
inline Int8Gemm int8_gemm_choice(int64_t m, bool packed, bool nk) {
  if (packed && m <= std::min<int64_t>(64, packed_max_m())) {
    if (m <= 4 && opk::has_avx512_vnni()) return Int8Gemm::vnni512;
    if (opk::amx_available()) return Int8Gemm::amx;
    if (opk::has_avx512_vnni()) return Int8Gemm::vnni512;
    if (opk::use_avx_vnni()) return Int8Gemm::avx_vnni;
    if (opk::isa() == opk::Isa::avx2) return Int8Gemm::avx2;
  }
  if (!nk) return Int8Gemm::aten;
  if (opk::has_avx512_vnni() && m <= vnni_max_m()) return Int8Gemm::vnni512;
  if (m <= amx_max_m() && opk::amx_available()) return Int8Gemm::amx;
  if (m <= avx2_max_m() && opk::use_avx_vnni()) return Int8Gemm::avx_vnni;
  if (m <= avx2_max_m() && opk::isa() == opk::Isa::avx2) return Int8Gemm::avx2;
  return Int8Gemm::aten;
}

inline const char* int8_gemm_name(Int8Gemm g) {
  switch (g) {
    case Int8Gemm::vnni512: return "avx512_vnni";
    case Int8Gemm::amx: return "amx";
    case Int8Gemm::avx_vnni: return "avx_vnni";
    case Int8Gemm::avx2: return "avx2";
    default: return "aten";
  }
}

// acc (m, n) int32, contiguous: the exact product of one batch. packed: the weight as
// pack_quant_weight lays it out, or null.
//
// With a packed weight (kernels/quant_matmul_packed.h) and up to OP_SDK_QMM_PACKED_MAX_M
// rows (default 64): AVX-512 VNNI for up to 4 rows, AMX above (AVX-512 VNNI's 8-row
// blocks on a CPU without AMX); without AVX-512, AVX-VNNI where the CPU has it, else AVX2
// (kernels/quant_matmul_avx2.h). The VNNI kernels read the
// weight at the same rate as AMX; at a few rows AMX's tile set-up costs more than it
// saves. Otherwise (or without a packed weight) the weight as it lies: when x2 is the
// transpose of an (n, k) row-major weight and m is within their limits, the in-place
// AVX-512 VNNI / AMX kernels, or without AVX-512 the AVX-VNNI / AVX2 ones; ATen's int8
// GEMM else.
inline void int8_product(const at::Tensor& a, const at::Tensor& b, at::Tensor& acc,
                         const int8_t* packed) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  if (m == 0 || n == 0) return;
  if (k == 0) {
    acc.zero_();
    return;
  }
  const bool nk = is_transposed_rows(b) && (n <= 1 || b.stride(1) >= k);
  const Int8Gemm g = int8_gemm_choice(m, packed != nullptr, nk);
  if (packed != nullptr && !(m <= std::min<int64_t>(64, packed_max_m()) && g != Int8Gemm::aten))
    packed = nullptr;
  const at::Tensor a_rows = a.stride(1) == 1 ? a : a.contiguous();
  if (g == Int8Gemm::aten && k == 1) {
    // an outer product: ATen's int8 GEMM (torch 2.13, CPU) returns garbage for k = 1
    const int8_t* ap = ptr<int8_t>(a_rows);
    const int8_t* bp = ptr<int8_t>(b);
    int32_t* cp = acc.data_ptr<int32_t>();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        cp[i * n + j] = int32_t(ap[i * a_rows.stride(0)]) * int32_t(bp[j * b.stride(1)]);
    return;
  }
  if (g == Int8Gemm::aten) {
    at::_int_mm_out(acc, blas_rows(a) ? a : dense_copy(a),
                    blas_rows(b) || blas_cols(b) ? b : dense_copy(b));
    return;
  }
#if OPK_X86
  const int8_t* bp = ptr<int8_t>(b);
  const int64_t ldb = n <= 1 ? k : b.stride(1), kpad = opk::gemm_nt_padded_k(k);
  int32_t* cp = acc.data_ptr<int32_t>();
  // ~64 KB of weight per task: in whole 16-column blocks / tiles, or groups of 4 (2 for
  // the AVX2 kernels) weight rows of the in-place kernels
  const bool avx = g == Int8Gemm::avx_vnni || g == Int8Gemm::avx2;
  const int64_t step = packed != nullptr || g == Int8Gemm::amx ? 16 : avx ? 2 : 4;
  const int64_t grain = std::max<int64_t>(1, (65536 / (packed != nullptr ? kpad : k)) / step);
  const int64_t tasks = (n + step - 1) / step;
  if (g == Int8Gemm::amx) {
    std::vector<int8_t> ap(size_t(opk::amx::amx_padded_rows(m) * kpad));
    opk::amx::prepare_a(ptr<int8_t>(a_rows), a_rows.stride(0), m, k, ap.data());
    at::parallel_for(0, tasks, grain, [&](int64_t g0, int64_t g1) {
      if (packed != nullptr)
        opk::packed::amx::gemm(ap.data(), m, packed, n, k, g0, g1, cp, n);
      else
        opk::amx::int8_gemm_nt(ap.data(), kpad, m, bp, ldb, k, g0 * 16, std::min(n, g1 * 16),
                               cp, n);
    });
    return;
  }
  if (g == Int8Gemm::avx2) {
    std::vector<int16_t> a16(size_t(m * kpad));
    opk::int8_gemm_prepare_a16(ptr<int8_t>(a_rows), a_rows.stride(0), m, k, a16.data());
    at::parallel_for(0, tasks, grain, [&](int64_t g0, int64_t g1) {
      if (packed != nullptr)
        opk::avx2mm::packed_gemm(a16.data(), m, packed, n, k, g0, g1, cp, n);
      else
        opk::avx2mm::gemm_nt(a16.data(), m, bp, ldb, k, g0 * 2, std::min(n, g1 * 2), cp, n);
    });
    return;
  }
  std::vector<uint8_t> au(size_t(m * kpad));
  opk::int8_gemm_nt_prepare_a(ptr<int8_t>(a_rows), a_rows.stride(0), m, k, au.data());
  at::parallel_for(0, tasks, grain, [&](int64_t g0, int64_t g1) {
    if (g == Int8Gemm::avx_vnni) {
      if (packed != nullptr)
        opk::avxvnni::packed_gemm(au.data(), m, packed, opk::packed::column_sums(packed, n, k),
                                  n, k, g0, g1, cp, n);
      else
        opk::avxvnni::gemm_nt(au.data(), m, bp, ldb, k, g0 * 2, std::min(n, g1 * 2), cp, n);
    } else if (packed != nullptr) {
      opk::packed::vnni::gemm(au.data(), m, packed, n, k, g0, g1, cp, n);
    } else {
      opk::vnni::int8_gemm_nt(au.data(), m, bp, ldb, k, g0 * 4, std::min(n, g1 * 4), cp, n);
    }
  });
#endif  // OPK_X86 (elsewhere every choice is ATen's GEMM above)
}

// The checked operator: product (packed weight when given) and epilogue, per batch.
inline at::Tensor quant_matmul_impl(int64_t code, const at::Tensor& x1, const at::Tensor& x2,
                                    const int8_t* packed, const at::Tensor& scale,
                                    const std::optional<at::Tensor>& offset,
                                    const std::optional<at::Tensor>& pertoken_scale,
                                    const std::optional<at::Tensor>& bias) {
  const int64_t m = x1.size(-2), k = x1.size(-1), n = x2.size(-1);
  const std::vector<int64_t> batch =
      at::infer_size(x1.sizes().slice(0, x1.dim() - 2), x2.sizes().slice(0, x2.dim() - 2));
  std::vector<int64_t> out_shape(batch);
  out_shape.push_back(m);
  out_shape.push_back(n);
  const c10::ScalarType out_t = code == kInt8    ? at::kChar
                                : code == kInt32 ? at::kInt
                                : code == kFloat16 ? at::kHalf
                                                   : at::kBFloat16;
  at::Tensor out = new_output(out_shape, x1.options().dtype(out_t));
  if (out.numel() == 0) return out;

  // (B, m, k) and (B, k, n) views of the broadcast operands (no copies)
  std::vector<int64_t> a_shape(batch), b_shape(batch);
  a_shape.insert(a_shape.end(), {m, k});
  b_shape.insert(b_shape.end(), {k, n});
  int64_t nb = 1;
  for (int64_t s : batch) nb *= s;
  // (2-D operands, the common case: no view ops, each costs a dispatcher call)
  const bool flat = x1.dim() == 2 && x2.dim() == 2;
  const at::Tensor a3 = flat ? x1 : x1.expand(a_shape).reshape({nb, m, k});
  const at::Tensor b3 = flat ? x2 : x2.expand(b_shape).reshape({nb, k, n});

  // the epilogue's per-channel vectors in fp32 (scale.float(), bias.float() of the contract)
  // (an int64 / uint64 scale: the 19-bit fp32 scale it packs, as unpack_quant_scale decodes
  // it)
  const at::Tensor s32 = unpack_quant_scale(scale).to(at::kFloat).contiguous();
  const bool float_bias = bias.has_value() && bias->scalar_type() != at::kInt;
  const at::Tensor fbias = float_bias ? bias->to(at::kFloat).contiguous() : at::Tensor();
  const at::Tensor ibias = bias.has_value() && !float_bias ? bias->contiguous() : at::Tensor();
  // a (batch, 1, n) bias: batch bi reads row bi
  const int64_t bias_step = bias.has_value() && bias->dim() == 3 ? n : 0;
  const at::Tensor pt = pertoken_scale.has_value() ? pertoken_scale->contiguous() : at::Tensor();
  // the int8 output's s9 offset (op_sdk/ops/quant_matmul.py): the one an int64 / uint64 scale
  // packs (an offset tensor beside it is not read), or quantize_s9(offset); none when zero
  at::Tensor off;
  if (code == kInt8) {
    if (scale.scalar_type() == at::kLong || scale.scalar_type() == at::kUInt64) {
      off = unpack_quant_offset(scale);
      if (!off.any().item<bool>()) off = at::Tensor();
    } else if (offset.has_value()) {
      off = quantize_s9(*offset);
    }
  }

  at::Tensor acc = code == kInt32 ? (flat ? out : out.view({nb, m, n}))
                                  : new_output({m, n}, x1.options().dtype(at::kInt));
  for (int64_t bi = 0; bi < nb; ++bi) {
    at::Tensor acc_b = code == kInt32 && !flat ? acc.select(0, bi) : acc;
    int8_product(flat ? a3 : a3.select(0, bi), flat ? b3 : b3.select(0, bi), acc_b, packed);
    int32_t* ap = acc_b.data_ptr<int32_t>();
    if (ibias.defined()) {  // acc + bias, wrapping like torch's int32 add
      const int32_t* bp = ibias.data_ptr<int32_t>() + bi * bias_step;
      parallel_rows(m, n, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t j = 0; j < n; ++j)
            ap[r * n + j] = int32_t(uint32_t(ap[r * n + j]) + uint32_t(bp[j]));
      });
    }
    if (code == kInt32) continue;
    auto epilogue = [&](auto to) {
      using O = decltype(to);
      O* op = reinterpret_cast<O*>(out.data_ptr()) + bi * m * n;
      const float* ptp = pt.defined() ? pt.data_ptr<float>() : nullptr;
      const float* fb = fbias.defined() ? fbias.data_ptr<float>() + bi * bias_step : nullptr;
      const float* ofp = off.defined() ? off.data_ptr<float>() : nullptr;
      parallel_rows(m, n, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r)
          opk::quant_matmul_epilogue_row<O>(ap + r * n, s32.data_ptr<float>(), s32.numel() > 1,
                                            ptp != nullptr ? ptp[r] : 1.0f, fb, ofp,
                                            off.defined() && off.numel() > 1, op + r * n, n);
      });
    };
    if (code == kInt8) epilogue(int8_t{});
    else if (code == kFloat16) epilogue(opk::fp16{});
    else epilogue(opk::bf16{});
  }
  return out;
}

}  // namespace opsdk
