// CPU launchers of npu_kv_rmsnorm_rope_cache and npu_kv_rmsnorm_rope_cache_v2_functional
// (op_sdk/ops/kv_rmsnorm_rope_cache.py; the in-place npu_kv_rmsnorm_rope_cache_v2 is derived
// from the functional twin by op_sdk.library). Their fast form: contiguous float16 /
// bfloat16 inputs and caches, no v / offsets / cache dtype codes, index values in range
// (checked here before anything is written); every other call, including every call that
// breaks a rule, goes to the reference, which holds the rules.
//
// Per token (in parallel), kernels/kv_rmsnorm_rope.h: c_kv, k_rope and their int8 rows.
// Then the rows are written into the cache copies in token order (a repeated slot keeps
// the last token, as the reference).
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kv_rmsnorm_rope.h"
#include "launch.h"
#include "registry.h"

namespace opsdk {
namespace {

using at::Tensor;
using OptTensor = std::optional<Tensor>;

enum class Mode { kNorm, kPaged, kPagedNz, kBlocked, kBlockedNz };

struct Form {
  int64_t b = 0, s = 0, dv = 0, dk = 0, cos_s = 0;
  int64_t block_size = 0, slots = 0, pages = 0;  // pages: index values per sequence (blocked)
  Mode mode = Mode::kNorm;
  bool k_quant = false, v_quant = false;
};

bool parse_mode(c10::string_view m, Mode* mode) {
  if (m == "Norm") *mode = Mode::kNorm;
  else if (m == "PA" || m == "PA_BNSD") *mode = Mode::kPaged;
  else if (m == "PA_NZ") *mode = Mode::kPagedNz;
  else if (m == "PA_BLK_BNSD") *mode = Mode::kBlocked;
  else if (m == "PA_BLK_NZ") *mode = Mode::kBlockedNz;
  else return false;
  return true;
}

bool nz(Mode m) { return m == Mode::kPagedNz || m == Mode::kBlockedNz; }
bool blocked(Mode m) { return m == Mode::kBlocked || m == Mode::kBlockedNz; }
int64_t c0_of(const Tensor& cache) { return cache.scalar_type() == at::kChar ? 32 : 16; }

// One cache's part of the fast form: its dtype (kv's, or int8 with a float32 scale of its
// width), its shape in the mode, contiguous.
bool cache_form(const Tensor& cache, const OptTensor& scale, int64_t width, const Form& f,
                at::ScalarType dt, bool* quant) {
  *quant = scale.has_value();
  if (*quant) {
    if (cache.scalar_type() != at::kChar || scale->scalar_type() != at::kFloat ||
        scale->dim() != 1 || scale->size(0) != width || !scale->is_contiguous())
      return false;
  } else if (cache.scalar_type() != dt) {
    return false;
  }
  if (!cache.is_contiguous() || cache.dim() != 4 || cache.size(3) != width) return false;
  if (f.mode == Mode::kNorm) return cache.size(0) == f.b && cache.size(1) == 1;
  const int64_t c0 = c0_of(cache);
  return cache.size(2) == 1 && cache.size(1) % c0 == 0 && (!nz(f.mode) || width % c0 == 0);
}

bool fast_form(const Tensor& kv, const Tensor& gamma, const Tensor& cos, const Tensor& sin,
               const Tensor& index, const Tensor& k_cache, const Tensor& ckv_cache,
               const OptTensor& k_rope_scale, const OptTensor& c_kv_scale,
               const OptTensor& k_rope_offset, const OptTensor& c_kv_offset, const OptTensor& v,
               c10::string_view cache_mode, Form* f) {
  const auto dt = kv.scalar_type();
  if ((dt != at::kHalf && dt != at::kBFloat16) || v.has_value() || k_rope_offset.has_value() ||
      c_kv_offset.has_value() || !parse_mode(cache_mode, &f->mode))
    return false;
  if (kv.dim() != 4 || kv.size(1) != 1 || !kv.is_contiguous() || gamma.scalar_type() != dt ||
      gamma.dim() != 1 || !gamma.is_contiguous())
    return false;
  f->b = kv.size(0);
  f->s = kv.size(2);
  f->dv = gamma.size(0);
  f->dk = kv.size(3) - f->dv;
  if (f->dv < 1 || f->dk < 2 || f->dk % 2 != 0) return false;
  if (cos.scalar_type() != dt || sin.scalar_type() != dt || cos.dim() != 4 ||
      sin.sizes() != cos.sizes() || !cos.is_contiguous() || !sin.is_contiguous() ||
      cos.size(0) != f->b || cos.size(1) != 1 || cos.size(3) != f->dk ||
      (cos.size(2) != 1 && cos.size(2) != f->s))
    return false;
  f->cos_s = cos.size(2);
  if (!cache_form(k_cache, k_rope_scale, f->dk, *f, dt, &f->k_quant) ||
      !cache_form(ckv_cache, c_kv_scale, f->dv, *f, dt, &f->v_quant) ||
      k_cache.sizes().slice(0, 3) != ckv_cache.sizes().slice(0, 3))
    return false;
  if (index.scalar_type() != at::kLong || !index.is_contiguous()) return false;
  if (f->mode == Mode::kNorm) {
    f->slots = k_cache.size(2);
    if (index.dim() != 2 || index.size(0) != f->b || index.size(1) != f->s) return false;
  } else {
    f->block_size = k_cache.size(1);
    f->slots = k_cache.size(0) * f->block_size;
    f->pages = blocked(f->mode) ? (f->s + f->block_size - 1) / f->block_size : f->s;
    if (index.dim() != 1 || index.size(0) != f->b * f->pages) return false;
  }
  // index values in [-1, slots): otherwise the reference raises the rule's error
  const int64_t* idx = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i)
    if (idx[i] < -1 || idx[i] >= f->slots) return false;
  return true;
}

// The cache address (element offset of the row's first value, or of its first c0 group in
// FRACTAL_NZ) of token (bi, si), or -1.
int64_t address(const Form& f, const int64_t* index, int64_t bi, int64_t si, int64_t width) {
  int64_t slot;
  if (f.mode == Mode::kNorm) {
    slot = index[bi * f.s + si];
    return slot < 0 ? -1 : (bi * f.slots + slot) * width;
  }
  if (blocked(f.mode)) {
    const int64_t page = index[bi * f.pages + si / f.block_size];
    if (page < 0) return -1;
    slot = page / f.block_size * f.block_size + si % f.block_size;
  } else {
    slot = index[bi * f.s + si];
    if (slot < 0) return -1;
  }
  if (!nz(f.mode)) return slot * width;
  return slot / f.block_size * width * f.block_size + slot % f.block_size;  // row offset, x c0 later
}

// Writes a row of `width` values (esize bytes each) at its address.
void put_row(char* cache, const char* row, int64_t addr, const Form& f, int64_t width,
             int64_t esize, int64_t c0) {
  if (!nz(f.mode)) {
    std::memcpy(cache + addr * esize, row, width * esize);
    return;
  }
  // FRACTAL_NZ: block base + row; group j of c0 values at (j * block_size + row) * c0
  const int64_t base = addr - addr % (width * f.block_size);
  const int64_t r = addr - base;
  for (int64_t j = 0; j < width / c0; ++j)
    std::memcpy(cache + (base + (j * f.block_size + r) * c0) * esize, row + j * c0 * esize,
                c0 * esize);
}

template <typename T>
void run(const Form& f, const Tensor& kv, const Tensor& gamma, const Tensor& cos,
         const Tensor& sin, const Tensor& index, const OptTensor& k_scale,
         const OptTensor& v_scale, double epsilon, Tensor& k_rope, Tensor& c_kv, Tensor& k_out,
         Tensor& v_out) {
  const int64_t tokens = f.b * f.s, dv = f.dv, dk = f.dk, d = dv + dk;
  const T* x = ptr<T>(kv);
  const T* g = ptr<T>(gamma);
  const T* cs = ptr<T>(cos);
  const T* sn = ptr<T>(sin);
  const float* ks = ptr_or_null<float>(k_scale);
  const float* vs = ptr_or_null<float>(v_scale);
  T* kr = ptr<T>(k_rope);
  T* cv = ptr<T>(c_kv);
  std::vector<int8_t> kq(f.k_quant ? tokens * dk : 0), vq(f.v_quant ? tokens * dv : 0);
  std::vector<float> gf(dv);
  for (int64_t j = 0; j < dv; ++j) gf[j] = opk::to_float(g[j]);
  const float recip = static_cast<float>(1.0 / static_cast<double>(dv));
  const float eps = static_cast<float>(epsilon);
  at::parallel_for(0, tokens, std::max<int64_t>(1, 16384 / d), [&](int64_t t0, int64_t t1) {
    opk::RowBuffer<float> scratch(2 * dk);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t bi = t / f.s, si = t % f.s;
      const int64_t crow = (bi * f.cos_s + (f.cos_s == 1 ? 0 : si)) * dk;
      opk::kv_rmsnorm_rope_row(x + t * d, gf.data(), cs + crow, sn + crow, cv + t * dv,
                               kr + t * dk, f.v_quant ? vq.data() + t * dv : nullptr, vs,
                               f.k_quant ? kq.data() + t * dk : nullptr, ks, dv, dk, recip,
                               eps, scratch.data);
    }
  });
  // the scatter, in token order
  const int64_t* idx = index.data_ptr<int64_t>();
  char* kc = static_cast<char*>(k_out.data_ptr());
  char* vc = static_cast<char*>(v_out.data_ptr());
  const int64_t kes = f.k_quant ? 1 : sizeof(T), ves = f.v_quant ? 1 : sizeof(T);
  const int64_t kc0 = f.k_quant ? 32 : 16, vc0 = f.v_quant ? 32 : 16;
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t bi = t / f.s, si = t % f.s;
    const int64_t ka = address(f, idx, bi, si, dk);
    if (ka < 0) continue;
    const char* krow = f.k_quant ? reinterpret_cast<const char*>(kq.data() + t * dk)
                                 : reinterpret_cast<const char*>(kr + t * dk);
    const char* vrow = f.v_quant ? reinterpret_cast<const char*>(vq.data() + t * dv)
                                 : reinterpret_cast<const char*>(cv + t * dv);
    put_row(kc, krow, ka, f, dk, kes, kc0);
    put_row(vc, vrow, address(f, idx, bi, si, dv), f, dv, ves, vc0);
  }
}

std::tuple<Tensor, Tensor, Tensor, Tensor> compute(
    const Form& f, const Tensor& kv, const Tensor& gamma, const Tensor& cos, const Tensor& sin,
    const Tensor& index, const Tensor& k_cache, const Tensor& ckv_cache,
    const OptTensor& k_rope_scale, const OptTensor& c_kv_scale, double epsilon) {
  Tensor k_out = k_cache.clone();
  Tensor v_out = ckv_cache.clone();
  Tensor k_rope = at::empty({f.b, 1, f.s, f.dk}, kv.options());
  Tensor c_kv = at::empty({f.b, 1, f.s, f.dv}, kv.options());
  if (kv.scalar_type() == at::kHalf)
    run<opk::fp16>(f, kv, gamma, cos, sin, index, k_rope_scale, c_kv_scale, epsilon, k_rope,
                   c_kv, k_out, v_out);
  else
    run<opk::bf16>(f, kv, gamma, cos, sin, index, k_rope_scale, c_kv_scale, epsilon, k_rope,
                   c_kv, k_out, v_out);
  return {k_out, v_out, k_rope, c_kv};
}

std::tuple<Tensor, Tensor, Tensor, Tensor> npu_kv_rmsnorm_rope_cache(
    const Tensor& kv, const Tensor& gamma, const Tensor& cos, const Tensor& sin,
    const Tensor& index, const Tensor& k_cache, const Tensor& ckv_cache,
    const OptTensor& k_rope_scale, const OptTensor& c_kv_scale, const OptTensor& k_rope_offset,
    const OptTensor& c_kv_offset, const OptTensor& v, double epsilon,
    c10::string_view cache_mode, bool is_output_kv) {
  Form f;
  if (!fast_form(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale,
                 k_rope_offset, c_kv_offset, v, cache_mode, &f)) {
    static const auto reference =
        reference_op<decltype(npu_kv_rmsnorm_rope_cache)>("npu_kv_rmsnorm_rope_cache");
    return reference.call(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                          c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode,
                          is_output_kv);
  }
  return compute(f, kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale,
                 epsilon);
}

std::tuple<Tensor, Tensor, Tensor, Tensor> npu_kv_rmsnorm_rope_cache_v2_functional(
    const Tensor& kv, const Tensor& gamma, const Tensor& cos, const Tensor& sin,
    const Tensor& index, const Tensor& k_cache, const Tensor& ckv_cache,
    const OptTensor& k_rope_scale, const OptTensor& c_kv_scale, const OptTensor& k_rope_offset,
    const OptTensor& c_kv_offset, const OptTensor& v, double epsilon,
    c10::string_view cache_mode, bool is_output_kv, std::optional<int64_t> k_cache_dtype,
    std::optional<int64_t> ckv_cache_dtype) {
  Form f;
  if (k_cache_dtype.has_value() || ckv_cache_dtype.has_value() ||
      !fast_form(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale, c_kv_scale,
                 k_rope_offset, c_kv_offset, v, cache_mode, &f)) {
    static const auto reference =
        reference_op<decltype(npu_kv_rmsnorm_rope_cache_v2_functional)>(
            "npu_kv_rmsnorm_rope_cache_v2_functional");
    return reference.call(kv, gamma, cos, sin, index, k_cache, ckv_cache, k_rope_scale,
                          c_kv_scale, k_rope_offset, c_kv_offset, v, epsilon, cache_mode,
                          is_output_kv, k_cache_dtype, ckv_cache_dtype);
  }
  auto [k_out, v_out, k_rope, c_kv] = compute(f, kv, gamma, cos, sin, index, k_cache,
                                              ckv_cache, k_rope_scale, c_kv_scale, epsilon);
  return {k_rope, c_kv, k_out, v_out};
}

}  // namespace

OPSDK_NATIVE_OP(npu, npu_kv_rmsnorm_rope_cache, &npu_kv_rmsnorm_rope_cache, kNotDifferentiable);
OPSDK_NATIVE_OP(npu, npu_kv_rmsnorm_rope_cache_v2_functional,
                &npu_kv_rmsnorm_rope_cache_v2_functional, kNotDifferentiable);

}  // namespace opsdk
