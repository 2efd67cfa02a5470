// CPU launcher of npu_quantize: the contract's checks (the same rules and words as
// op_sdk/ops/quantize.py), layout, dtype dispatch and threading around the row kernels
// of kernels/quant.h.
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <vector>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "quant.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kInt8 = 1, kQInt8 = 12, kUInt8 = 0, kQUInt8 = 13, kInt32 = 3, kQInt32 = 14,
                  kQUInt4x2 = 16;

struct QuantizePlan {
  int64_t code;
  int64_t axis;  // the honoured axis, non-negative
};

// _check_quant_param of op_sdk/ops/quantize.py: 1-D of size 1 or input.size(ax); with
// div_mode=False also input's rank with every dim 1 but ax (per-head scales).
void check_quant_param(const char* op, const char* name, const Tensor& t, const Tensor& input,
                       int64_t ax, bool div_mode) {
  const int64_t n = input.size(ax);
  if (t.dim() == 1) {
    OPK_CHECK(t.size(0) == 1 || t.size(0) == n, op, name, "must be 1-D of size 1 or input.size(",
              ax, ") = ", n, ", got ", shape_str(t.sizes()));
    return;
  }
  bool ok = !div_mode && t.dim() == input.dim() && (t.size(ax) == 1 || t.size(ax) == n);
  for (int64_t i = 0; ok && i < t.dim(); ++i) ok = i == ax || t.size(i) == 1;
  std::vector<int64_t> want(static_cast<size_t>(input.dim()), 1);
  want[static_cast<size_t>(ax)] = n;
  OPK_CHECK(ok, op, name, "must be 1-D of size 1 or ", n,
            div_mode ? std::string() : ", or of shape " + shape_str(want) + " (div_mode=False)",
            ", got ", shape_str(t.sizes()));
}

QuantizePlan check_quantize(const Tensor& input, const Tensor& scales,
                            const std::optional<Tensor>& zero_points, int64_t dtype,
                            int64_t axis, bool div_mode) {
  const char* op = "npu_quantize";
  check_float_dtype(input, op, "input");
  OPK_CHECK(input.dim() >= 1, op, "input", "must have at least 1 dim");
  const int64_t code = dtype_arg(op, "dtype", dtype,
                                 {kInt8, kQInt8, kUInt8, kQUInt8, kInt32, kQInt32, kQUInt4x2},
                                 -1);
  const int64_t d = input.dim();
  int64_t ax;
  if (div_mode) {
    OPK_CHECK(axis >= -d && axis < d, op, "axis", "must be in [", -d, ", ", d - 1, "], got ",
              axis);
    ax = axis < 0 ? axis + d : axis;
  } else {
    // one of the last two axes: -2 is honoured, any axis >= -1 means the last
    OPK_CHECK(axis >= -2, op, "axis", "must be -2 or >= -1 (the last axis) when "
              "div_mode=False, got ", axis);
    OPK_CHECK(axis != -2 || d >= 2, op, "axis", "-2 needs an input of at least 2 dims, got ", d);
    ax = axis == -2 ? d - 2 : d - 1;
  }
  if (div_mode) {
    OPK_CHECK(code != kQUInt4x2, op, "dtype",
              "quint4x2 (int4 packed in int32) requires div_mode=False");
  } else {
    OPK_CHECK(scales.scalar_type() == input.scalar_type(), op, "scales",
              "must have the dtype of 'input' (", dtype_name(input.scalar_type()),
              ") when div_mode=False, got ", dtype_name(scales.scalar_type()));
    if (zero_points.has_value())
      OPK_CHECK(zero_points->scalar_type() == input.scalar_type(), op, "zero_points",
                "must have the dtype of 'input' (", dtype_name(input.scalar_type()),
                ") when div_mode=False, got ", dtype_name(zero_points->scalar_type()));
  }
  if (code == kQUInt4x2)
    OPK_CHECK(input.size(-1) % 8 == 0, op, "input",
              "last dim must be a multiple of 8 for quint4x2 output, got ", input.size(-1));
  check_float_dtype(scales, op, "scales");
  check_quant_param(op, "scales", scales, input, ax, div_mode);
  if (zero_points.has_value()) {
    const Tensor& zp = *zero_points;
    OPK_CHECK(zp.scalar_type() != at::kBool && !zp.is_complex(), op, "zero_points",
              "must be numeric, got ", dtype_name(zp.scalar_type()));
    check_quant_param(op, "zero_points", zp, input, ax, div_mode);
    if (!div_mode)
      OPK_CHECK(zp.sizes() == scales.sizes(), op, "zero_points", "must have the shape of "
                "'scales' ", shape_str(scales.sizes()), " when div_mode=False, got ",
                shape_str(zp.sizes()));
  }
  return {code, ax};
}

Tensor npu_quantize(const Tensor& input, const Tensor& scales,
                    const std::optional<Tensor>& zero_points, int64_t dtype, int64_t axis,
                    bool div_mode) {
  const QuantizePlan plan = check_quantize(input, scales, zero_points, dtype, axis, div_mode);
  const Tensor x = input.contiguous();
  const bool int4 = plan.code == kQUInt4x2;
  c10::ScalarType out_t;
  float lo, hi;
  if (int4) {
    out_t = at::kInt, lo = -8.0f, hi = 7.0f;
  } else if (plan.code == kInt8 || plan.code == kQInt8) {
    out_t = at::kChar, lo = -128.0f, hi = 127.0f;
  } else if (plan.code == kUInt8 || plan.code == kQUInt8) {
    out_t = at::kByte, lo = 0.0f, hi = 255.0f;
  } else {
    out_t = at::kInt, lo = -2147483648.0f, hi = 2147483648.0f;  // saturated exactly in-kernel
  }
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  if (int4) shape.back() /= 8;
  // int4: contiguous (packed); else in the input's layout, as torch_npu's Meta
  // (empty_like) allocates it; the kernels write contiguous rows into `out`
  LikeOutput y = int4 ? LikeOutput::itself(new_output(shape, x.options().dtype(out_t)))
                      : output_like(input, out_t);
  Tensor out = y.work;
  const int64_t numel = x.numel();
  if (numel == 0) return y.finish();

  // scales / zero points: fp32, expanded to one value per channel of the axis
  const int64_t c = x.size(plan.axis);
  const Tensor s32 = scales.to(at::kFloat).contiguous();
  const Tensor z32 = zero_points.has_value() ? zero_points->to(at::kFloat).contiguous() : Tensor();
  const bool scalar = s32.numel() == 1 && (!z32.defined() || z32.numel() == 1);
  // one value per channel: the tensor itself, or a size-1 tensor broadcast into a vector
  std::vector<float> s_bcast, z_bcast;
  auto per_channel = [&](const Tensor& t, std::vector<float>& bcast) -> const float* {
    if (!t.defined()) return nullptr;
    if (t.numel() == c) return t.data_ptr<float>();
    bcast.assign(static_cast<size_t>(c), t.data_ptr<float>()[0]);
    return bcast.data();
  };
  const float* sv = per_channel(s32, s_bcast);
  const float* zv = per_channel(z32, z_bcast);
  int64_t inner = 1;
  for (int64_t dd = plan.axis + 1; dd < x.dim(); ++dd) inner *= x.size(dd);
  const int64_t outer = numel / (c * inner);

  dispatch_float(x.scalar_type(), [&](auto tx) {
    using T = decltype(tx);
    const T* xp = ptr<T>(x);
    auto run = [&](auto to) {
      using O = decltype(to);  // int8_t for int4 (packed from an int8 row)
      O* op = int4 ? nullptr : reinterpret_cast<O*>(out.data_ptr());
      int32_t* op4 = int4 ? out.data_ptr<int32_t>() : nullptr;
      auto at_elem = [&](int64_t i) { return op ? op + i : nullptr; };
      auto at_elem4 = [&](int64_t i) { return op4 ? op4 + i / 8 : nullptr; };
      if (scalar) {  // one scale: the whole tensor is one run, split in 1024-element chunks
        const float s0 = s32.data_ptr<float>()[0];
        const float z0 = z32.defined() ? z32.data_ptr<float>()[0] : 0.0f;
        const int64_t chunks = (numel + 1023) / 1024;
        at::parallel_for(0, chunks, 16, [&](int64_t b, int64_t e) {
          const int64_t i0 = b * 1024, i1 = std::min(numel, e * 1024);
          opk::quantize_run<T, O>(xp + i0, s0, z0, div_mode, at_elem(i0), at_elem4(i0),
                                  i1 - i0, lo, hi);
        });
      } else if (inner == 1) {  // the last axis: per-column vectors
        parallel_rows(outer, c, [&](int64_t b, int64_t e) {
          opk::quantize_rows_percol<T, O>(xp + b * c, sv, zv, div_mode, at_elem(b * c),
                                          at_elem4(b * c), e - b, c, lo, hi);
        });
      } else {  // runs of `inner` elements, one per (outer, channel)
        at::parallel_for(0, outer * c, std::max<int64_t>(1, 16384 / inner),
                         [&](int64_t b, int64_t e) {
          for (int64_t k = b; k < e; ++k)
            opk::quantize_run<T, O>(xp + k * inner, sv[k % c], zv ? zv[k % c] : 0.0f, div_mode,
                                    at_elem(k * inner), at_elem4(k * inner), inner, lo, hi);
        });
      }
    };
    if (int4 || out_t == at::kChar) run(int8_t{});
    else if (out_t == at::kByte) run(uint8_t{});
    else run(int32_t{});
  });
  return y.finish();
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_quantize, &npu_quantize, kNotDifferentiable);

}  // namespace opsdk
