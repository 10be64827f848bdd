// Copyright 2026 The dtensor Authors.
#include <dtensor/base/buffer_pool.h>

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Parallel.h>
#include <absl/container/flat_hash_map.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/Storage.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/accumulate.h>

#include <dtensor/base/check.h>
#include <dtensor/base/environment.h>
#include <dtensor/base/tensor_memory.h>

namespace dtensor {
namespace {

// Blocks are aligned as libtorch aligns CPU tensors (vectorized kernels rely
// on it); every size class is a multiple of it.
constexpr int64_t kAlignment = 64;
constexpr int64_t kSmallestClass = 512;
constexpr int64_t kMaxDefaultCapacity = int64_t{8} << 30;
constexpr std::ptrdiff_t kOwnBlocksLookedAt = 8;  // see BufferPool::take_idle

// `bytes` rounded up to its size class: one of four per power of two.
int64_t size_class(int64_t bytes) {
  if (bytes <= kSmallestClass) return kSmallestClass;
  const int floor_log2 = 63 - __builtin_clzll(static_cast<uint64_t>(bytes - 1));
  const int64_t step = int64_t{1} << (floor_log2 - 2);
  return (bytes + step - 1) / step * step;
}

int64_t default_capacity() {
  const int64_t physical = int64_t{sysconf(_SC_PHYS_PAGES)} * int64_t{sysconf(_SC_PAGESIZE)};
  return std::min(std::max<int64_t>(physical, 0) / 8, kMaxDefaultCapacity);
}

// Tells the core this thread is polling (a no-op on other architectures).
void relax_cpu() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// A mutex whose waiters poll it a while, spinning and then yielding their
// core, before they sleep on it. The local backend's ranks (threads, maybe
// more than cores) allocate at the same moments, and a sleep on the pool's
// short critical sections cost more than a small redistribute (R -> S(0) of
// 16 KiB on 4 ranks and 2 cores: 11-12 us with a plain std::mutex, 3.0-3.5
// us polling). A std::mutex underneath, so ThreadSanitizer sees every
// hand-over (it cannot see into Debian's uninstrumented absl::Mutex).
class YieldingMutex {
 public:
  void lock() {
    // The critical sections are a few hash-map operations: a holder running
    // on another core lets go within the spins; one that lost its core needs
    // the yields; after both, this thread sleeps.
    constexpr int kSpins = 32, kYields = 32;
    for (int i = 0; i < kSpins + kYields; ++i) {
      if (mutex_.try_lock()) return;
      if (i < kSpins) {
        relax_cpu();
      } else {
        std::this_thread::yield();
      }
    }
    mutex_.lock();
  }
  void unlock() { mutex_.unlock(); }

 private:
  std::mutex mutex_;
};

// One allocation. While idle it is linked into the pool's recency list.
struct Block {
  void* data = nullptr;
  int64_t bytes = 0;  // its size class
  Block* newer = nullptr;
  Block* older = nullptr;
  std::thread::id returned_by;  // the thread that returned it last
};

class BufferPool {
 public:
  // Never destroyed: a tensor may return its block after static destructors
  // ran (a global tensor, a thread that outlives main).
  static BufferPool& instance() {
    static BufferPool* const pool = new BufferPool();
    return *pool;
  }

  Block* take(int64_t bytes) {
    const int64_t size = size_class(bytes);
    if (Block* block = take_idle(size)) return block;
    // The system allocation (an mmap, when large) happens outside the lock.
    void* data = std::aligned_alloc(kAlignment, static_cast<size_t>(size));
    DTENSOR_CHECK(data != nullptr, "buffer pool: allocating ", size,
                  " bytes: expected memory, found none");
    const std::lock_guard<YieldingMutex> lock(mutex_);
    in_use_bytes_ += size;
    ++misses_;
    return new Block{data, size, nullptr, nullptr, {}};
  }

  void give_back(Block* block) {
    std::vector<Block*> evicted;
    {
      const std::lock_guard<YieldingMutex> lock(mutex_);
      in_use_bytes_ -= block->bytes;
      block->returned_by = std::this_thread::get_id();
      if (block->bytes > capacity_) {
        evicted.push_back(block);
      } else {
        evict_for(capacity_ - block->bytes, evicted);
        idle_by_size_[block->bytes].push_back(block);
        link_newest(block);
        cached_bytes_ += block->bytes;
      }
    }
    free_blocks(evicted);
  }

  int64_t capacity() {
    const std::lock_guard<YieldingMutex> lock(mutex_);
    return capacity_;
  }

  void set_capacity(int64_t bytes) {
    DTENSOR_CHECK(bytes >= 0, "buffer pool capacity: expected at least 0 bytes, found ", bytes);
    std::vector<Block*> evicted;
    {
      const std::lock_guard<YieldingMutex> lock(mutex_);
      capacity_ = bytes;
      evict_for(capacity_, evicted);
    }
    free_blocks(evicted);
  }

  void release() {
    std::vector<Block*> evicted;
    {
      const std::lock_guard<YieldingMutex> lock(mutex_);
      evict_for(0, evicted);
    }
    free_blocks(evicted);
  }

  BufferPoolStats stats() {
    const std::lock_guard<YieldingMutex> lock(mutex_);
    int64_t blocks = 0;
    for (const auto& [size, idle] : idle_by_size_) blocks += static_cast<int64_t>(idle.size());
    return BufferPoolStats{capacity_, cached_bytes_, blocks, in_use_bytes_, hits_, misses_};
  }

 private:
  BufferPool()
      : capacity_(whole_number_from_environment("DTENSOR_BUFFER_POOL_CAPACITY", default_capacity(),
                                                0, "a whole number of bytes, 0 or more")) {}

  // An idle block of `size` bytes, now in use; nullptr when there is none.
  // Of the kOwnBlocksLookedAt returned last, the newest this thread returned
  // is taken first, else the newest: its memory is likelier to be in this
  // core's cache (the local backend's ranks, threads that each drop their
  // last output and ask for the next: S(0) -> R at 256 KiB took 1.31x the raw
  // all-gather with the newest block of any thread, 0.98x with its own).
  Block* take_idle(int64_t size) {
    const std::lock_guard<YieldingMutex> lock(mutex_);
    auto it = idle_by_size_.find(size);
    if (it == idle_by_size_.end() || it->second.empty()) return nullptr;
    std::vector<Block*>& idle = it->second;
    const auto looked_at =
        idle.rbegin() +
        std::min<std::ptrdiff_t>(static_cast<std::ptrdiff_t>(idle.size()), kOwnBlocksLookedAt);
    const std::thread::id me = std::this_thread::get_id();
    const auto own = std::find_if(idle.rbegin(), looked_at,
                                  [&](const Block* block) { return block->returned_by == me; });
    const auto chosen = own != looked_at ? std::prev(own.base()) : std::prev(idle.end());
    Block* block = *chosen;
    idle.erase(chosen);
    unlink(block);
    cached_bytes_ -= size;
    in_use_bytes_ += size;
    ++hits_;
    return block;
  }

  // Moves the idle blocks returned least recently to `evicted` until at most
  // `bytes` stay cached. Called with the lock held; the caller frees them
  // after releasing it.
  void evict_for(int64_t bytes, std::vector<Block*>& evicted) {
    while (cached_bytes_ > bytes) {
      Block* block = oldest_;
      unlink(block);
      std::vector<Block*>& same_size = idle_by_size_[block->bytes];
      same_size.erase(std::find(same_size.begin(), same_size.end(), block));
      cached_bytes_ -= block->bytes;
      evicted.push_back(block);
    }
  }

  static void free_blocks(const std::vector<Block*>& blocks) {
    for (Block* block : blocks) {
      std::free(block->data);
      delete block;
    }
  }

  void link_newest(Block* block) {
    block->newer = nullptr;
    block->older = newest_;
    if (newest_ != nullptr) newest_->newer = block;
    newest_ = block;
    if (oldest_ == nullptr) oldest_ = block;
  }

  void unlink(Block* block) {
    (block->newer != nullptr ? block->newer->older : newest_) = block->older;
    (block->older != nullptr ? block->older->newer : oldest_) = block->newer;
    block->newer = block->older = nullptr;
  }

  YieldingMutex mutex_;
  int64_t capacity_;
  int64_t cached_bytes_ = 0;
  int64_t in_use_bytes_ = 0;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
  // Idle blocks by size class, the most recently returned last.
  absl::flat_hash_map<int64_t, std::vector<Block*>> idle_by_size_;
  // Every idle block, from the most recently returned on.
  Block* newest_ = nullptr;
  Block* oldest_ = nullptr;
};

void return_block(void* block) { BufferPool::instance().give_back(static_cast<Block*>(block)); }

bool poolable(const at::TensorOptions& options) {
  return options.device().is_cpu() && options.layout() == at::kStrided && !options.pinned_memory();
}

}  // namespace

at::Tensor pooled_empty(c10::IntArrayRef shape, const at::TensorOptions& options) {
  if (!poolable(options)) return at::empty(shape, options);
  at::detail::check_size_nonnegative(shape);
  const caffe2::TypeMeta dtype = options.dtype();
  const int64_t bytes = c10::multiply_integers(shape) * static_cast<int64_t>(dtype.itemsize());
  if (bytes == 0) return at::empty(shape, options);
  Block* block = BufferPool::instance().take(bytes);
  c10::DataPtr data(block->data, block, &return_block, c10::Device(c10::kCPU));
  // As at::empty builds a CPU tensor; the CPU allocator serves a resize.
  c10::Storage storage(c10::Storage::use_byte_size_t(), static_cast<size_t>(bytes), std::move(data),
                       c10::GetCPUAllocator(), /*resizable=*/true);
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(shape);
  return tensor;
}

namespace {

// A contiguous tensor whose copy ATen would not spread over threads, and
// which autograd does not watch (backward or forward mode): copied with one
// memcpy, skipping the TensorIterator that takes most of a small copy_'s
// time (a redistribute R -> S(0) of 4 KiB spends a third of its time there).
bool copies_as_bytes(const at::Tensor& t) {
  return holds_plain_cpu_values(t) && t.is_contiguous() && t.numel() < at::internal::GRAIN_SIZE &&
         !(t.requires_grad() && at::GradMode::is_enabled()) && !t._fw_grad(/*level=*/0).defined();
}

}  // namespace

at::Tensor pooled_clone(const at::Tensor& tensor) {
  at::Tensor out = pooled_empty(tensor.sizes(), tensor.options());
  if (!copies_as_bytes(tensor)) return out.copy_(tensor);
  if (tensor.numel() > 0) std::memcpy(out.data_ptr(), tensor.data_ptr(), tensor.nbytes());
  return out;
}

at::Tensor pooled_contiguous(const at::Tensor& tensor) {
  return tensor.is_contiguous() ? tensor : pooled_clone(tensor);
}

int64_t buffer_pool_capacity() { return BufferPool::instance().capacity(); }

void set_buffer_pool_capacity(int64_t bytes) { BufferPool::instance().set_capacity(bytes); }

void release_cached_buffers() { BufferPool::instance().release(); }

BufferPoolStats buffer_pool_stats() { return BufferPool::instance().stats(); }

}  // namespace dtensor
