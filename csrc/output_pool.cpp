// The pool of large CPU outputs (launch.h, new_output).
//
// A fresh multi-MB output costs its page faults: the kernel that first writes it waits
// while the OS zeroes every page, and on a 4096 x 4096 problem that is as long as the
// kernel's own work (glibc hands blocks of 32 MB and more straight back to the OS, so
// every call starts from unmapped memory). The pool keeps the blocks the kernels' outputs
// freed, up to a byte budget, and hands them out again: memory already mapped, so no
// faults, and large enough for the streaming-store paths (stream_friendly).
//
// - Blocks are 2 MB multiples, 2 MB aligned, advised as huge pages once when created
//   (OP_SDK_CPU_HUGEPAGES=0: not advised).
// - A request takes the smallest free block of at least its size and at most 5/4 of it;
//   else a new block is made.
// - A freed block is kept while the free blocks total at most the budget, the least
//   recently freed ones given back to the OS first. Blocks in use are not counted.
// - Budget: OP_SDK_CPU_POOL_MB (MiB, 0: no pool), default min(256 MiB, RAM / 16);
//   op_sdk.cpu_output_pool() reads the counters and can release every free block.
#include <ATen/ATen.h>
#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <list>
#include <mutex>
#include <unordered_map>

#include "launch.h"

namespace opsdk {
namespace {

constexpr size_t kBlockAlign = size_t(2) << 20;

size_t default_budget() {
  const char* env = std::getenv("OP_SDK_CPU_POOL_MB");
  if (env != nullptr && *env != '\0') return size_t(std::max<long long>(0, std::atoll(env))) << 20;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  const size_t ram = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
  return std::min(size_t(256) << 20, ram / 16);
}

class OutputPool final : public c10::Allocator {
 public:
  OutputPool() : budget_(default_budget()) {}

  size_t budget() const { return budget_; }

  c10::DataPtr allocate(size_t n) override {
    if (n < kPoolMinBytes || budget_ == 0) return c10::GetCPUAllocator()->allocate(n);
    const size_t want = (n + kBlockAlign - 1) & ~(kBlockAlign - 1);
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto best = free_.end();
      for (auto it = free_.begin(); it != free_.end(); ++it)
        if (it->second >= want && it->second <= want + want / 4 &&
            (best == free_.end() || it->second < best->second))
          best = it;
      if (best != free_.end()) {
        p = best->first;
        free_bytes_ -= best->second;
        free_.erase(best);
        ++hits_;
      } else {
        ++misses_;
      }
    }
    if (p == nullptr) p = new_block(want);
    return {p, p, &OutputPool::release_ctx, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &OutputPool::release_ctx; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  // Gives every free block back to the OS; returns the bytes released.
  size_t release_free() {
    std::list<std::pair<void*, size_t>> gone;
    {
      std::lock_guard<std::mutex> lock(mu_);
      gone.swap(free_);
      free_bytes_ = 0;
      for (const auto& b : gone) size_of_.erase(b.first);
    }
    size_t bytes = 0;
    for (const auto& b : gone) {
      bytes += b.second;
      std::free(b.first);
    }
    return bytes;
  }

  PoolStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    size_t all = 0;
    for (const auto& kv : size_of_) all += kv.second;
    return {budget_, free_bytes_, all - free_bytes_, hits_, misses_};
  }

 private:
  static void release_ctx(void* p);

  void* new_block(size_t bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, kBlockAlign, bytes) != 0 || p == nullptr)
      TORCH_CHECK(false, "op_sdk: out of memory allocating a ", bytes, "-byte CPU output");
    if (huge_pages_enabled()) (void)madvise(p, bytes, MADV_HUGEPAGE);
    std::lock_guard<std::mutex> lock(mu_);
    size_of_[p] = bytes;
    return p;
  }

  void give_back(void* p) {
    std::list<std::pair<void*, size_t>> gone;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const size_t bytes = size_of_.at(p);
      if (bytes > budget_) {
        size_of_.erase(p);
        gone.emplace_back(p, bytes);
      } else {
        while (free_bytes_ + bytes > budget_) {  // the least recently freed go first
          gone.push_back(free_.front());
          free_bytes_ -= free_.front().second;
          size_of_.erase(free_.front().first);
          free_.pop_front();
        }
        free_.emplace_back(p, bytes);
        free_bytes_ += bytes;
      }
    }
    for (const auto& b : gone) std::free(b.first);
  }

  const size_t budget_;
  std::mutex mu_;
  std::list<std::pair<void*, size_t>> free_;   // least recently freed first
  std::unordered_map<void*, size_t> size_of_;  // every block, free or in use
  size_t free_bytes_ = 0;
  uint64_t hits_ = 0, misses_ = 0;
};

// Never destroyed: outputs may be freed during interpreter shutdown, after statics go.
OutputPool& pool() {
  static OutputPool* p = new OutputPool();
  return *p;
}

void OutputPool::release_ctx(void* p) { pool().give_back(p); }

}  // namespace

bool pool_serves(size_t bytes) { return bytes >= kPoolMinBytes && pool().budget() > 0; }

at::Tensor new_output(at::IntArrayRef shape, const at::TensorOptions& options) {
  const size_t bytes = size_t(c10::multiply_integers(shape)) * options.dtype().itemsize();
  if (!pool_serves(bytes)) {
    at::Tensor t = at::empty(shape, options);
    advise_huge_pages(t);
    return t;
  }
  return at::Tensor(at::detail::empty_generic(shape, &pool(),
                                              c10::DispatchKeySet(c10::DispatchKey::CPU),
                                              options.dtype().toScalarType(), std::nullopt));
}

at::Tensor pooled_empty_strided(at::IntArrayRef shape, at::IntArrayRef strides,
                                const at::TensorOptions& options) {
  return at::Tensor(at::detail::empty_strided_generic(
      shape, strides, &pool(), c10::DispatchKeySet(c10::DispatchKey::CPU),
      options.dtype().toScalarType()));
}

PoolStats output_pool_stats() { return pool().stats(); }
size_t output_pool_release() { return pool().release_free(); }

}  // namespace opsdk
