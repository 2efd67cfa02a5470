// CPU launcher of npu_qkv_rms_norm_rope_cache_functional (op_sdk/ops/qkv_rms_norm_rope_cache.py;
// the in-place npu_qkv_rms_norm_rope_cache is derived from it by op_sdk.library). Its fast
// form: contiguous float16 / bfloat16 inputs and caches in PA_NZ, index values in range
// (checked before anything is written); every other call, including every call that breaks
// a rule, goes to the reference, which holds the rules.
//
// Per token (in parallel), kernels/qkv_rms_norm_rope.h: each q head's norm + RoPE into the
// new q_out, each k head's into k (and its float32 values for the int8 rows), v's int8 rows.
// Then the rows go into the cache copies in token order, FRACTAL_NZ group by group (a
// repeated slot keeps the last token, as the reference).
#include <torch/library.h>

#include <cstring>
#include <vector>

#include "launch.h"
#include "qkv_rms_norm_rope.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

struct QkvForm {
  int64_t b = 0, s = 0, nq = 0, nk = 0, nv = 0, d = 0, cos_rows = 0, blocks = 0,
          block_size = 0;
};

bool nz_cache(const Tensor& c, const OptTensor& scale, const OptTensor& offset, int64_t heads,
              const QkvForm& f, at::ScalarType dt) {
  const bool quant = scale.has_value();
  if (quant ? c.scalar_type() != at::kChar : (c.scalar_type() != dt || offset.has_value()))
    return false;
  for (const OptTensor* t : {&scale, &offset})
    if (t->has_value() && ((*t)->scalar_type() != at::kFloat || (*t)->dim() != 2 ||
                           (*t)->size(0) != heads || (*t)->size(1) != f.d ||
                           !(*t)->is_contiguous()))
      return false;
  const int64_t c0 = quant ? 32 : 16;
  return c.is_contiguous() && c.dim() == 4 && f.d % c0 == 0 && c.size(1) == heads * f.d / c0 &&
         c.size(3) == c0 && c.size(2) % c0 == 0;
}

bool fast_form(const Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, const Tensor& cos,
               const Tensor& sin, const Tensor& index, const Tensor& q_out,
               const Tensor& k_cache, const Tensor& v_cache, at::IntArrayRef qkv_size,
               at::IntArrayRef head_nums, const OptTensor& k_scale, const OptTensor& v_scale,
               const OptTensor& k_offset, const OptTensor& v_offset, c10::string_view cache_mode,
               QkvForm* f) {
  const auto dt = qkv.scalar_type();
  if ((dt != at::kHalf && dt != at::kBFloat16) || cache_mode != "PA_NZ" ||
      qkv_size.size() != 4 || head_nums.size() != 3)
    return false;
  f->b = qkv_size[0];
  f->s = qkv_size[1];
  f->d = qkv_size[3];
  f->nq = head_nums[0];
  f->nk = head_nums[1];
  f->nv = head_nums[2];
  const int64_t n = f->nq + f->nk + f->nv, t = f->b * f->s;
  if (f->b < 0 || f->s < 0 || f->nq < 1 || f->nk < 1 || f->nv < 1 || qkv_size[2] != n ||
      f->d < 2 || f->d % 2 != 0)
    return false;
  if (!qkv.is_contiguous() || qkv.dim() != 2 || qkv.size(0) != t || qkv.size(1) != n * f->d)
    return false;
  for (const Tensor* g : {&q_gamma, &k_gamma})
    if (g->scalar_type() != dt || g->dim() != 1 || g->size(0) != f->d || !g->is_contiguous())
      return false;
  if (cos.scalar_type() != dt || sin.scalar_type() != dt || cos.dim() != 2 ||
      sin.sizes() != cos.sizes() || !cos.is_contiguous() || !sin.is_contiguous() ||
      (cos.size(0) != t && cos.size(0) != f->b) || cos.size(1) != f->d)
    return false;
  f->cos_rows = cos.size(0);
  if (q_out.scalar_type() != dt || !q_out.is_contiguous() || q_out.dim() != 2 ||
      q_out.size(0) != t || q_out.size(1) != f->nq * f->d)
    return false;
  if (!nz_cache(k_cache, k_scale, k_offset, f->nk, *f, dt) ||
      !nz_cache(v_cache, v_scale, v_offset, f->nv, *f, dt) || v_cache.size(0) != k_cache.size(0) ||
      v_cache.size(2) != k_cache.size(2))
    return false;
  f->blocks = k_cache.size(0);
  f->block_size = k_cache.size(2);
  if (index.scalar_type() != at::kLong || !index.is_contiguous() || index.dim() != 1 ||
      index.size(0) != t)
    return false;
  const int64_t* idx = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < t; ++i)
    if (idx[i] < -1 || idx[i] >= f->blocks * f->block_size) return false;
  return true;
}

// Token rows (width values of esize bytes each) into a FRACTAL_NZ cache copy at their slots.
void scatter_nz(char* cache, const char* rows, const int64_t* index, int64_t tokens,
                int64_t width, int64_t esize, int64_t c0, int64_t block_size) {
  const int64_t groups = width / c0;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t slot = index[t];
    if (slot < 0) continue;
    const int64_t base = slot / block_size * groups * block_size, r = slot % block_size;
    for (int64_t g = 0; g < groups; ++g)
      std::memcpy(cache + ((base + g * block_size + r) * c0) * esize,
                  rows + (t * width + g * c0) * esize, c0 * esize);
  }
}

template <typename T>
void run(const QkvForm& f, const Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma,
         const Tensor& cos, const Tensor& sin, const Tensor& index, const OptTensor& k_scale,
         const OptTensor& v_scale, const OptTensor& k_offset, const OptTensor& v_offset,
         double epsilon, Tensor& q_new, Tensor& k_before, Tensor& k_new, Tensor& v_new) {
  const int64_t t_all = f.b * f.s, d = f.d, n = f.nq + f.nk + f.nv;
  const bool kq = k_scale.has_value(), vq = v_scale.has_value();
  std::vector<float> qg(d), kg(d);
  for (int64_t j = 0; j < d; ++j) {
    qg[j] = opk::to_float(ptr<T>(q_gamma)[j]);
    kg[j] = opk::to_float(ptr<T>(k_gamma)[j]);
  }
  std::vector<int8_t> k8(kq ? t_all * f.nk * d : 0), v8(vq ? t_all * f.nv * d : 0);
  const T* x = ptr<T>(qkv);
  const T* cs = ptr<T>(cos);
  const T* sn = ptr<T>(sin);
  T* qo = ptr<T>(q_new);
  T* ko = ptr<T>(k_before);
  const float eps = static_cast<float>(epsilon);
  at::parallel_for(0, t_all, std::max<int64_t>(1, 16384 / (n * d)), [&](int64_t t0, int64_t t1) {
    opk::RowBuffer<float> scratch(d), k32(kq ? d : 1);
    for (int64_t t = t0; t < t1; ++t) {
      const T* row = x + t * n * d;
      const int64_t crow = (f.cos_rows == t_all ? t : t / std::max<int64_t>(f.s, 1)) * d;
      for (int64_t i = 0; i < f.nq; ++i)
        opk::qk_head_norm_rope(row + i * d, qg.data(), cs + crow, sn + crow,
                               qo + (t * f.nq + i) * d, nullptr, d, eps, scratch.data);
      for (int64_t i = 0; i < f.nk; ++i) {
        const int64_t o = (t * f.nk + i) * d;
        opk::qk_head_norm_rope(row + (f.nq + i) * d, kg.data(), cs + crow, sn + crow, ko + o,
                               kq ? k32.data : nullptr, d, eps, scratch.data);
        if (kq)
          opk::quantize_divided(static_cast<const float*>(k32.data), ptr<float>(*k_scale) + i * d,
                                k_offset ? ptr<float>(*k_offset) + i * d : nullptr,
                                k8.data() + o, d);
      }
      if (vq)
        for (int64_t i = 0; i < f.nv; ++i)
          opk::quantize_divided(row + (f.nq + f.nk + i) * d, ptr<float>(*v_scale) + i * d,
                                v_offset ? ptr<float>(*v_offset) + i * d : nullptr,
                                v8.data() + (t * f.nv + i) * d, d);
    }
  });
  const int64_t* idx = index.data_ptr<int64_t>();
  const int64_t kw = f.nk * d, vw = f.nv * d;
  scatter_nz(static_cast<char*>(k_new.data_ptr()),
             kq ? reinterpret_cast<const char*>(k8.data()) : reinterpret_cast<const char*>(ko),
             idx, t_all, kw, kq ? 1 : sizeof(T), kq ? 32 : 16, f.block_size);
  if (vq) {
    scatter_nz(static_cast<char*>(v_new.data_ptr()), reinterpret_cast<const char*>(v8.data()),
               idx, t_all, vw, 1, 32, f.block_size);
  } else {  // v's rows are qkv's own values: gather them first
    std::vector<T> vrows(t_all * vw);
    for (int64_t t = 0; t < t_all; ++t)
      std::memcpy(vrows.data() + t * vw, x + t * n * d + (f.nq + f.nk) * d, vw * sizeof(T));
    scatter_nz(static_cast<char*>(v_new.data_ptr()), reinterpret_cast<const char*>(vrows.data()),
               idx, t_all, vw, sizeof(T), 16, f.block_size);
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor, Tensor> npu_qkv_rms_norm_rope_cache_functional(
    const Tensor& qkv, const Tensor& q_gamma, const Tensor& k_gamma, const Tensor& cos,
    const Tensor& sin, const Tensor& index, const Tensor& q_out, const Tensor& k_cache,
    const Tensor& v_cache, at::IntArrayRef qkv_size, at::IntArrayRef head_nums,
    const OptTensor& k_scale, const OptTensor& v_scale, const OptTensor& k_offset,
    const OptTensor& v_offset, double epsilon, c10::string_view cache_mode, bool is_output_qkv) {
  QkvForm f;
  if (!fast_form(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache, qkv_size,
                 head_nums, k_scale, v_scale, k_offset, v_offset, cache_mode, &f)) {
    static const auto reference =
        reference_op<decltype(npu_qkv_rms_norm_rope_cache_functional)>(
            "npu_qkv_rms_norm_rope_cache_functional");
    return reference.call(qkv, q_gamma, k_gamma, cos, sin, index, q_out, k_cache, v_cache,
                          qkv_size, head_nums, k_scale, v_scale, k_offset, v_offset, epsilon,
                          cache_mode, is_output_qkv);
  }
  const int64_t t = f.b * f.s;
  Tensor q_new = at::empty({t, f.nq * f.d}, qkv.options());
  Tensor k_before = at::empty({t, f.nk * f.d}, qkv.options());
  Tensor k_new = k_cache.clone();
  Tensor v_new = v_cache.clone();
  if (qkv.scalar_type() == at::kHalf)
    run<opk::fp16>(f, qkv, q_gamma, k_gamma, cos, sin, index, k_scale, v_scale, k_offset,
                   v_offset, epsilon, q_new, k_before, k_new, v_new);
  else
    run<opk::bf16>(f, qkv, q_gamma, k_gamma, cos, sin, index, k_scale, v_scale, k_offset,
                   v_offset, epsilon, q_new, k_before, k_new, v_new);
  if (!is_output_qkv) {
    auto zero = [&] { return at::zeros({}, qkv.options()); };
    return {zero(), zero(), zero(), q_new, k_new, v_new};
  }
  Tensor v_before = qkv.narrow(1, (f.nq + f.nk) * f.d, f.nv * f.d).contiguous();
  return {q_new.clone(), k_before, v_before, q_new, k_new, v_new};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_qkv_rms_norm_rope_cache_functional,
                &npu_qkv_rms_norm_rope_cache_functional, kNotDifferentiable);

}  // namespace opsdk
