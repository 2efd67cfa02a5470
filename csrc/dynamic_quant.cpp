// CPU launcher of npu_dynamic_quant: the contract's checks (the same rules and words as
// op_sdk/ops/dynamic_quant.py), layout, dtype dispatch and threading around the row
// kernels of kernels/quant.h.
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checks.h"
#include "launch.h"
#include "registry.h"
#include "quant.h"
#include "float8_codes.h"

namespace opsdk {
namespace {

using at::Tensor;

constexpr int64_t kInt8 = 1, kQUInt4x2 = 16;
constexpr int64_t kMaxGroups = 1024;

enum class QuantMode { kPerToken, kPerTensor, kPerChannel };

struct DynamicQuantPlan {
  bool int4;
  QuantMode mode;
  int64_t code;
};

DynamicQuantPlan check_dynamic_quant(const Tensor& input, const std::optional<Tensor>& smooth,
                                     const std::optional<Tensor>& group_index,
                                     std::optional<int64_t> dst_type, c10::string_view mode,
                                     double dst_type_max) {
  const char* op = "npu_dynamic_quant";
  check_float_dtype(input, op, "input");
  OPK_CHECK(input.dim() > 1, op, "input", "must have more than 1 dim, got ", input.dim());
  const int64_t code =
      dtype_arg(op, "dst_type", dst_type,
                {kInt8, kQUInt4x2, kFloat8E5m2, kFloat8E4m3fn, kHiFloat8, kNpuE5m2, kNpuE4m3fn},
                kInt8);
  QuantMode qm;
  if (mode == "pertoken") qm = QuantMode::kPerToken;
  else if (mode == "pertensor") qm = QuantMode::kPerTensor;
  else if (mode == "perchannel") qm = QuantMode::kPerChannel;
  else
    TORCH_CHECK(false, op, ": argument 'quant_mode' must be one of pertoken, pertensor, "
                "perchannel, got '", std::string(mode), "'");
  if (code == kHiFloat8) {
    OPK_CHECK(dst_type_max >= 0.0 && dst_type_max <= 32768.0, op, "dst_type_max",
              "must be in [0, 32768] for hifloat8 output (0: 32768), got ", dst_type_max);
  } else {
    OPK_CHECK(dst_type_max == 0.0, op, "dst_type_max",
              "must be 0.0 for int8 / int4 / float8 outputs (it sets hifloat8's range only), got ",
              dst_type_max);
  }
  const int64_t h = input.size(-1);
  if (code == kQUInt4x2)
    OPK_CHECK(h % 8 == 0, op, "input",
              "last dim must be a multiple of 8 for int4 (quint4x2) output, got ", h);
  if (smooth.has_value()) check_float_dtype(*smooth, op, "smooth_scales");
  if (group_index.has_value()) {
    const Tensor& g = *group_index;
    OPK_CHECK(qm == QuantMode::kPerToken, op, "group_index",
              "requires quant_mode 'pertoken', got '", std::string(mode), "'");
    OPK_CHECK(g.scalar_type() == at::kInt, op, "group_index", "must have dtype int32, got ",
              dtype_name(g.scalar_type()));
    OPK_CHECK(g.dim() == 1 && g.size(0) >= 1 && g.size(0) <= kMaxGroups, op, "group_index",
              "must be 1-D with 1 to ", kMaxGroups, " groups, got shape ", shape_str(g.sizes()));
    OPK_CHECK(smooth.has_value(), op, "smooth_scales", "is required with group_index");
    OPK_CHECK(smooth->dim() == 2 && smooth->size(0) == g.size(0) && smooth->size(1) == h, op,
              "smooth_scales", "must have shape (E, H) = (", g.size(0), ", ", h,
              ") with group_index, got ", shape_str(smooth->sizes()));
  } else if (smooth.has_value() && qm == QuantMode::kPerChannel) {
    // per channel (aclnnDynamicQuantV3): one smoothing factor per row of dim -2
    OPK_CHECK(smooth->dim() == 1 && smooth->size(0) == input.size(-2), op, "smooth_scales",
              "must be 1-D of length input.size(-2) = ", input.size(-2),
              " with quant_mode 'perchannel', got shape ", shape_str(smooth->sizes()));
  } else if (smooth.has_value()) {
    check_1d(*smooth, op, "smooth_scales", h);
  }
  return {code == kQUInt4x2, qm, code};
}

// Data rules of group_index (cumulative END row of each group); returns its values.
std::vector<int64_t> group_ends(const Tensor& group_index, int64_t rows) {
  const char* op = "npu_dynamic_quant";
  const Tensor g = group_index.contiguous();
  const int32_t* p = g.data_ptr<int32_t>();
  std::vector<int64_t> ends(p, p + g.numel());
  for (int64_t v : ends) OPK_CHECK(v >= 0, op, "group_index", "must have no negative values");
  for (size_t i = 1; i < ends.size(); ++i)
    OPK_CHECK(ends[i] >= ends[i - 1], op, "group_index", "must be non-decreasing");
  OPK_CHECK(ends.back() == rows, op, "group_index",
            "last value must equal the number of rows ", rows, ", got ", ends.back());
  return ends;
}

std::tuple<Tensor, Tensor> npu_dynamic_quant(const Tensor& input,
                                             const std::optional<Tensor>& smooth_scales,
                                             const std::optional<Tensor>& group_index,
                                             std::optional<int64_t> dst_type,
                                             c10::string_view quant_mode, double dst_type_max) {
  const DynamicQuantPlan plan = check_dynamic_quant(input, smooth_scales, group_index, dst_type,
                                                    quant_mode, dst_type_max);
  if (is_float8_code(plan.code)) {  // off the CPU hot path: the reference, its one implementation
    static const auto reference = reference_op<decltype(npu_dynamic_quant)>("npu_dynamic_quant");
    return reference.call(input, smooth_scales, group_index, dst_type, quant_mode, dst_type_max);
  }
  // per channel: the smoothing factor of row s multiplies row s, in fp32 as the reference
  // does; the column kernels then run on the smoothed fp32 rows
  const bool row_smooth = plan.mode == QuantMode::kPerChannel && smooth_scales.has_value();
  const Tensor x = row_smooth ? (input.to(at::kFloat) *
                                 smooth_scales->to(at::kFloat).unsqueeze(-1)).contiguous()
                              : input.contiguous();
  const int64_t h = x.size(-1), rows = leading_numel(x, 1);
  const float dmax = plan.int4 ? 7.0f : 127.0f;

  std::vector<int64_t> y_shape(x.sizes().begin(), x.sizes().end());
  if (plan.int4) y_shape.back() /= 8;
  // int4: contiguous (packed); int8 in the input's layout, as torch_npu's Meta (empty_like)
  // allocates it: the kernels write contiguous rows into `y`, finish() lays them out
  LikeOutput yl = plan.int4 ? LikeOutput::itself(new_output(y_shape, x.options().dtype(at::kInt)))
                            : output_like(input, at::kChar);
  Tensor y = yl.work;
  std::vector<int64_t> s_shape;
  if (plan.mode == QuantMode::kPerToken) {
    s_shape.assign(x.sizes().begin(), x.sizes().end() - 1);
  } else if (plan.mode == QuantMode::kPerTensor) {
    s_shape = {1};
  } else {
    s_shape.assign(x.sizes().begin(), x.sizes().end() - 2);
    s_shape.push_back(h);
  }
  Tensor scale = at::empty(s_shape, x.options().dtype(at::kFloat));
  std::vector<int64_t> ends;
  if (group_index.has_value()) ends = group_ends(*group_index, rows);  // raises on bad data
  if (scale.numel() > 0) scale.zero_();  // the all-zero answer where nothing is reduced
  if (rows == 0 || h == 0) return {yl.finish(), scale};

  // smooth scales: the input's dtype or fp32 (other float dtypes are up-cast once here)
  std::optional<Tensor> sm;
  if (smooth_scales.has_value() && !row_smooth) {
    sm = smooth_scales->scalar_type() == x.scalar_type()
             ? smooth_scales->contiguous()
             : smooth_scales->to(at::kFloat).contiguous();
  }
  int8_t* y8 = plan.int4 ? nullptr : y.data_ptr<int8_t>();
  int32_t* y4 = plan.int4 ? y.data_ptr<int32_t>() : nullptr;
  auto y8_at = [&](int64_t r) { return y8 ? y8 + r * h : nullptr; };
  auto y4_at = [&](int64_t r) { return y4 ? y4 + r * (h / 8) : nullptr; };
  float* sc = scale.data_ptr<float>();

  dispatch_float(x.scalar_type(), [&](auto tx) {
    using T = decltype(tx);
    const T* xp = ptr<T>(x);
    auto run = [&](auto ts) {
      using S = decltype(ts);
      const S* smp = ptr_or_null<S>(sm);
      if (plan.mode == QuantMode::kPerToken && !ends.empty()) {
        // MoE: rows [ends[i-1], ends[i]) use smooth_scales[i]
        parallel_rows(rows, h, [&](int64_t b, int64_t e) {
          size_t i = std::upper_bound(ends.begin(), ends.end(), b) - ends.begin();
          while (b < e) {
            const int64_t stop = std::min(e, ends[i]);
            opk::dynamic_quant_rows<T, S>(xp + b * h, smp + i * h, y8_at(b), y4_at(b), sc + b,
                                          stop - b, h, dmax);
            b = stop;
            ++i;
          }
        });
      } else if (plan.mode == QuantMode::kPerToken) {
        parallel_rows(rows, h, [&](int64_t b, int64_t e) {
          opk::dynamic_quant_rows<T, S>(xp + b * h, smp, y8_at(b), y4_at(b), sc + b, e - b, h,
                                        dmax);
        });
      } else if (plan.mode == QuantMode::kPerTensor) {
        const float amax = at::parallel_reduce(
            0, rows, std::max<int64_t>(1, 16384 / h), 0.0f,
            [&](int64_t b, int64_t e, float m) {
              return opk::absmax1(m, opk::absmax_rows<T, S>(xp + b * h, smp, e - b, h));
            },
            [](float a, float b) { return opk::absmax1(a, b); });
        sc[0] = amax / dmax;
        const float mul = amax > 0.0f ? dmax / amax : 0.0f;
        parallel_rows(rows, h, [&](int64_t b, int64_t e) {
          opk::quant_rows_mul<T, S>(xp + b * h, smp, mul, nullptr, y8_at(b), y4_at(b), e - b, h,
                                    dmax);
        });
      } else {
        // per channel: amax over dim -2 within each of the `batches` (m, h) slices
        const int64_t m = x.size(-2), batches = rows / m;
        constexpr int64_t kCols = 256;
        const int64_t blocks = (h + kCols - 1) / kCols;
        std::vector<float> colmax(size_t(batches * h), 0.0f), colmul(size_t(batches * h));
        at::parallel_for(0, batches * blocks, std::max<int64_t>(1, 16384 / (m * kCols)),
                         [&](int64_t b, int64_t e) {
          for (int64_t t = b; t < e; ++t) {
            const int64_t bi = t / blocks, c0 = (t % blocks) * kCols;
            const int64_t nc = std::min(kCols, h - c0);
            opk::colmax_rows<T, S>(xp + bi * m * h + c0, h, smp ? smp + c0 : nullptr, m, nc,
                                   colmax.data() + bi * h + c0);
          }
        });
        for (int64_t j = 0; j < batches * h; ++j) {
          sc[j] = colmax[j] / dmax;
          colmul[j] = colmax[j] > 0.0f ? dmax / colmax[j] : 0.0f;
        }
        parallel_rows(rows, h, [&](int64_t b, int64_t e) {
          while (b < e) {  // one call per batch slice (its own column multipliers)
            const int64_t bi = b / m, stop = std::min(e, (bi + 1) * m);
            opk::quant_rows_mul<T, S>(xp + b * h, smp, 0.0f, colmul.data() + bi * h, y8_at(b),
                                      y4_at(b), stop - b, h, dmax);
            b = stop;
          }
        });
      }
    };
    if (sm.has_value() && sm->scalar_type() == at::kFloat) run(float{});
    else run(T{});
  });
  return {yl.finish(), scale};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_dynamic_quant, &npu_dynamic_quant, kNotDifferentiable);

}  // namespace opsdk
