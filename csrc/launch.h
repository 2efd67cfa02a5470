// Launcher plumbing shared by the csrc/*.cpp files: dtype -> kernel element type,
// typed data pointers, the row-parallel loop, and outputs laid out like the fakes'.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "simd.h"

namespace opsdk {

// Calls f(T{}) with T the kernel element type of a float dtype (float, opk::bf16, opk::fp16).
template <typename F>
inline void dispatch_float(c10::ScalarType t, F&& f) {
  switch (t) {
    case at::kFloat: f(float{}); break;
    case at::kHalf: f(opk::fp16{}); break;
    case at::kBFloat16: f(opk::bf16{}); break;
    default: TORCH_CHECK(false, "op_sdk: no CPU kernel for dtype ", t);
  }
}

template <typename T>
inline T* ptr(const at::Tensor& t) {
  return reinterpret_cast<T*>(t.data_ptr());
}
template <typename T>
inline const T* ptr_or_null(const std::optional<at::Tensor>& t) {
  return t.has_value() ? reinterpret_cast<const T*>(t->data_ptr()) : nullptr;
}
// An optional input made contiguous (None stays None).
inline std::optional<at::Tensor> contiguous_or_none(const std::optional<at::Tensor>& t) {
  return t.has_value() ? std::optional<at::Tensor>(t->contiguous()) : std::nullopt;
}

// Splits rows over the intra-op threads, with at least ~16K elements per task so that small
// problems stay on the calling thread. f(begin, end).
template <typename F>
inline void parallel_rows(int64_t rows, int64_t n, const F& f) {
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(n, 1));
  at::parallel_for(0, rows, grain, f);
}

// A non-negative integer setting from the environment (a kernel-choice limit), or dflt.
// f(o, j0, j1) over row o of `rows`, elements [j0, j1) of its n, in tasks of >= 16K
// elements (a long row split across threads)
template <typename F>
void parallel_halves(int64_t rows, int64_t n, const F& f) {
  constexpr int64_t kChunk = 16384;
  const int64_t chunks = std::max<int64_t>(1, (n + kChunk - 1) / kChunk);
  const int64_t len = (n + chunks - 1) / chunks;
  parallel_rows(rows * chunks, len, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t o = t / chunks, j0 = (t % chunks) * len;
      if (j0 < n) f(o, j0, std::min(n, j0 + len));
    }
  });
}

inline int64_t env_limit(const char* name, int64_t dflt) {
  const char* env = std::getenv(name);
  return env != nullptr ? std::max<int64_t>(0, std::atoll(env)) : dflt;
}

inline int64_t leading_numel(const at::Tensor& x, int64_t trailing_dims) {
  int64_t rows = 1;
  for (int64_t d = 0; d < x.dim() - trailing_dims; ++d) rows *= x.size(d);
  return rows;
}

// Fresh multi-MB outputs are page-faulted by the kernel that first writes them, one 4 KB
// fault at a time: on a 4096 x 4096 problem that costs more than the arithmetic. Ask for
// transparent huge pages on the 2 MB-aligned part first (what c10's allocator does under
// THP_MEM_ALLOC_ENABLE=1), so it is one fault per 2 MB. A hint only: harmless on memory
// that is already mapped, ignored where THP is off; OP_SDK_CPU_HUGEPAGES=0 turns it off.
inline bool huge_pages_enabled() {
  static const bool enabled = [] {
    const char* env = std::getenv("OP_SDK_CPU_HUGEPAGES");
    return env == nullptr || std::strcmp(env, "0") != 0;
  }();
  return enabled;
}
inline void advise_huge_pages(const at::Tensor& t) {
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  const size_t bytes = t.nbytes();
  if (!huge_pages_enabled() || bytes < 2 * kHuge || t.data_ptr() == nullptr) return;
  const uintptr_t p = reinterpret_cast<uintptr_t>(t.data_ptr());
  const uintptr_t b = (p + kHuge - 1) & ~(kHuge - 1), e = (p + bytes) & ~(kHuge - 1);
  if (e > b) (void)madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
}

// The fp32 scale an npu_trans_quant_param value holds (int64: the fp32 bits with the low
// 13 mantissa bits cleared, in its low word; uint64 holds the same bits); a float32 scale
// as it is (unpack_quant_scale of op_sdk/ops/_common.py).
inline at::Tensor unpack_quant_scale(const at::Tensor& scale) {
  if (scale.scalar_type() != at::kLong && scale.scalar_type() != at::kUInt64) return scale;
  const at::Tensor bits = scale.scalar_type() == at::kUInt64 ? scale.view(at::kLong) : scale;
  return at::bitwise_and(bits, 0xFFFFE000).to(at::kInt).view(at::kFloat);
}

// The offset an npu_trans_quant_param value packs (bits 37..45, a signed 9-bit integer), as
// float32 (unpack_quant_offset of op_sdk/ops/_common.py).
inline at::Tensor unpack_quant_offset(const at::Tensor& scale) {
  const at::Tensor bits = scale.scalar_type() == at::kUInt64 ? scale.view(at::kLong) : scale;
  const at::Tensor raw = at::bitwise_and(at::bitwise_right_shift(bits, 37), 0x1FF);
  return at::where(raw >= 256, raw - 512, raw).to(at::kFloat).contiguous();
}

// CANN's float32 -> s9 step (quantize_s9 of op_sdk/ops/_common.py): round half to even,
// saturate to [-256, 255], NaN to -256.
inline at::Tensor quantize_s9(const at::Tensor& v) {
  return at::round(at::nan_to_num(v.to(at::kFloat), -256.0).clamp(-256.0, 255.0)).contiguous();
}

// A float -> integer quantised store in ATen calls (quantize_round of op_sdk/ops/_common.py,
// and kernels/simd.h's store_q): round half to even, saturate to [lo, hi], NaN to 0.
inline at::Tensor quantize_round(const at::Tensor& v, double lo, double hi,
                                 c10::ScalarType dtype) {
  return at::nan_to_num(at::round(v).clamp_(lo, hi), 0.0).to(dtype);
}

// Outputs of at least this many bytes come from the pool of csrc/output_pool.cpp.
constexpr size_t kPoolMinBytes = size_t(2) << 20;
// Whether an output of that many bytes comes from the pool (it is on and big enough).
bool pool_serves(size_t bytes);
// An output the kernels fill: a contiguous CPU tensor, from the pool when pool_serves
// (else at::empty, huge pages advised).
at::Tensor new_output(at::IntArrayRef shape, const at::TensorOptions& options);
// A strided one from the pool (callers check pool_serves first).
at::Tensor pooled_empty_strided(at::IntArrayRef shape, at::IntArrayRef strides,
                                const at::TensorOptions& options);
struct PoolStats {
  size_t budget_bytes, free_bytes, in_use_bytes;
  uint64_t hits, misses;
};
PoolStats output_pool_stats();
size_t output_pool_release();  // frees every free block; the bytes freed

// Whether the kernels write an output with non-temporal stores: it is larger than the
// caches, aligned for whole-vector stores (rows of n % 16 == 0 elements), and its pages are
// already mapped (the allocator handed back memory it had used: no read-for-ownership
// then). Fresh pages are zeroed into the cache by the page-fault handler, and there the
// ordinary stores that hit those lines are the cheaper ones. Three pages are sampled.
// OP_SDK_CPU_STREAM=never / always overrides the choice (always: any aligned output; the
// tests use it to run the streaming paths on small shapes).
inline bool stream_friendly(const at::Tensor& t, int64_t n) {
  constexpr size_t kMinBytes = size_t(8) << 20;
  static const int mode = [] {  // 0 auto, 1 never, 2 always
    const char* env = std::getenv("OP_SDK_CPU_STREAM");
    if (env == nullptr) return 0;
    return std::strcmp(env, "never") == 0 ? 1 : std::strcmp(env, "always") == 0 ? 2 : 0;
  }();
  const uintptr_t p = reinterpret_cast<uintptr_t>(t.data_ptr());
  const size_t bytes = t.nbytes();
  if (mode == 1 || n % 16 != 0 || p % 64 != 0 || bytes == 0) return false;
  if (mode == 2) return true;
  if (bytes < kMinBytes) return false;
  static const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  for (uintptr_t a : {p, p + bytes / 2, p + bytes - 1}) {
    unsigned char resident = 0;
    if (mincore(reinterpret_cast<void*>(a & ~(page - 1)), page, &resident) != 0 ||
        (resident & 1) == 0)
      return false;
  }
  return true;
}

// A large all-zero output: fresh anonymous pages read as zero (the OS maps its zero page
// until someone writes), so it costs no stores and no page zeroing. Small ones: at::zeros.
// x's shape with dim d halved, contiguous (the SwiGLU outputs, as their fakes allocate them;
// npu_dynamic_mx_quant's float4 pairs, in uint8)
inline at::Tensor halved_output(const at::Tensor& x, int64_t d,
                                std::optional<c10::ScalarType> dtype = std::nullopt) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[d] /= 2;
  return new_output(shape, dtype.has_value() ? x.options().dtype(*dtype) : x.options());
}

inline at::Tensor zeros_output(at::IntArrayRef shape, const at::TensorOptions& options) {
  constexpr size_t kMinBytes = size_t(2) << 20;
  const size_t bytes = size_t(c10::multiply_integers(shape)) * options.dtype().itemsize();
  if (bytes < kMinBytes) return at::zeros(shape, options);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return at::zeros(shape, options);
  return at::from_blob(p, shape, [bytes](void* q) { munmap(q, bytes); }, options);
}

// An output shaped like x as the fake functions allocate it (torch.empty_like: a dense
// non-contiguous x keeps its strides). The kernels write contiguous rows into `work`;
// finish() copies them into `result` in that one case.
struct LikeOutput {
  at::Tensor result;
  at::Tensor work;
  at::Tensor finish() {
    if (!result.is_same(work)) result.copy_(work);
    return result;
  }
  static LikeOutput itself(const at::Tensor& t) { return {t, t}; }  // written in place
};
// An output of x's shape with standard (contiguous) strides whatever x's layout, as
// torch_npu's Meta allocates the fused quantising norms' outputs (torch.empty(x.size())).
inline LikeOutput contiguous_output(const at::Tensor& x, c10::ScalarType dtype) {
  return LikeOutput::itself(new_output(x.sizes(), x.options().dtype(dtype)));
}
inline LikeOutput output_like(const at::Tensor& x, c10::ScalarType dtype) {
  const at::TensorOptions options = x.options().dtype(dtype);
  at::Tensor r;
  if (pool_serves(size_t(x.numel()) * options.dtype().itemsize())) {
    // the strides empty_like gives, read from a meta tensor; the memory from the pool
    const at::Tensor like = at::empty_like(x, options.device(at::kMeta));
    r = pooled_empty_strided(like.sizes(), like.strides(), options);
  } else {
    r = at::empty_like(x, options);
    if (r.is_contiguous()) advise_huge_pages(r);
  }
  if (r.is_contiguous()) return {r, r};
  return {r, new_output(x.sizes(), options)};
}

}  // namespace opsdk
