// Copyright 2026 The dtensor Authors.
//
// The CPU buffer pool (base/buffer_pool.h): tensors as at::empty makes them,
// blocks reused, the bound kept, release, blocks returned from other threads.
// The pool is process-wide, so each test sets its own capacity, starts from
// an empty pool and compares counts before and after.
#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/base/buffer_pool.h>
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// An empty pool of `capacity` bytes for one test; the capacity it had, and an
// empty pool, afterwards.
class ScopedPool {
 public:
  explicit ScopedPool(int64_t capacity) : saved_(buffer_pool_capacity()) {
    release_cached_buffers();
    set_buffer_pool_capacity(capacity);
  }
  ~ScopedPool() {
    set_buffer_pool_capacity(saved_);
    release_cached_buffers();
  }
  ScopedPool(const ScopedPool&) = delete;
  ScopedPool& operator=(const ScopedPool&) = delete;

 private:
  int64_t saved_;
};

// `bytes` of float32 (a multiple of 4).
at::Tensor floats(int64_t bytes) { return pooled_empty({bytes / 4}, at::kFloat); }

TEST(BufferPoolTest, MakesTensorsAsEmptyDoes) {
  const ScopedPool pool(16 * kMiB);
  at::Tensor t = pooled_empty({3, 5}, at::TensorOptions().dtype(at::kDouble));
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(t.scalar_type(), at::kDouble);
  EXPECT_TRUE(t.device().is_cpu());
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_FALSE(t.requires_grad());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data_ptr()) % 64, 0u);
  t.copy_(at::arange(15, at::kDouble).reshape({3, 5}));
  EXPECT_TRUE(at::equal(t * 2, at::arange(0, 30, 2, at::kDouble).reshape({3, 5})));
  // Growing moves the data to libtorch's allocator and keeps the values.
  t.resize_({1000, 1000});
  EXPECT_TRUE(at::equal(t.view({-1}).narrow(0, 0, 15), at::arange(15, at::kDouble)));
  EXPECT_EQ(pooled_empty({0, 7}, at::kFloat).sizes(), (std::vector<int64_t>{0, 7}));
  EXPECT_TRUE(pooled_empty({2}, at::TensorOptions().device(at::kMeta)).is_meta());
}

TEST(BufferPoolTest, CloneAndContiguousCopyOnlyWhenNeeded) {
  const ScopedPool pool(16 * kMiB);
  const at::Tensor source = at::arange(12, at::kInt).reshape({3, 4});
  const at::Tensor copy = pooled_clone(source);
  EXPECT_TRUE(at::equal(copy, source));
  EXPECT_FALSE(copy.is_alias_of(source));
  EXPECT_TRUE(pooled_contiguous(source).is_alias_of(source));
  const at::Tensor transposed = pooled_contiguous(source.t());
  EXPECT_TRUE(transposed.is_contiguous());
  EXPECT_TRUE(at::equal(transposed, source.t()));
}

// Small contiguous clones copy bytes; what the bytes do not say (a lazy
// conjugate or negative bit, autograd's record, a zero tensor, a quantizer)
// and what ATen would spread over threads go through copy_: every clone
// equals its source either way. The path shows in the clone's version
// (copy_ writes it once; the bytes are copied before it is a tensor).
TEST(BufferPoolTest, ClonesEqualTheirSourceOnBothCopyPaths) {
  const ScopedPool pool(16 * kMiB);
  const auto expect_clone = [](const at::Tensor& source, bool as_bytes) {
    const at::Tensor copy = pooled_clone(source);
    EXPECT_FALSE(copy.is_conj());
    EXPECT_FALSE(copy.is_neg());
    EXPECT_TRUE(at::equal(copy.resolve_conj().resolve_neg(), source.resolve_conj().resolve_neg()))
        << source;
    EXPECT_EQ(copy._version(), as_bytes ? 0 : 1) << source;
  };
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kLong, at::kBool}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    expect_clone(at::arange(24, at::kLong).reshape({2, 3, 4}).to(dtype), true);
    expect_clone(at::arange(3, at::kLong).to(dtype).select(0, 1), true);  // 0-dim, offset 1
  }
  const at::Tensor complex = at::complex(at::arange(6.0), at::arange(6.0) + 10);
  expect_clone(complex, true);
  expect_clone(complex.conj(), false);
  expect_clone(at::_neg_view(at::arange(6.0)), false);
  expect_clone(at::_efficientzerotensor({2, 3}, at::kFloat), false);
  expect_clone(at::arange(1 << 16, at::kFloat), false);  // past ATen's grain
  const at::Tensor watched = at::arange(6.0).requires_grad_();
  const at::Tensor copy = pooled_clone(watched);
  EXPECT_TRUE(copy.requires_grad());
  copy.sum().backward();
  EXPECT_TRUE(at::equal(watched.grad(), at::ones_like(watched)));
  // A quantized tensor keeps to copy_, which refuses a plain destination
  // rather than drop the scale.
  const at::Tensor quantized = at::quantize_per_tensor(at::arange(4.0), 0.5, 0, at::kQInt8);
  EXPECT_THROW(pooled_clone(quantized), c10::Error);
  EXPECT_TRUE(at::equal(pooled_clone(at::empty({0, 3})), at::empty({0, 3})));
}

TEST(BufferPoolTest, AFreedBlockServesTheNextRequestOfItsSizeClass) {
  const ScopedPool pool(16 * kMiB);
  const BufferPoolStats before = buffer_pool_stats();
  void* first = nullptr;
  {
    const at::Tensor t = floats(kMiB + 4);  // class: 1.25 MiB
    first = t.data_ptr();
    EXPECT_EQ(buffer_pool_stats().in_use_bytes - before.in_use_bytes, kMiB * 5 / 4);
  }
  BufferPoolStats now = buffer_pool_stats();
  EXPECT_EQ(now.cached_bytes, kMiB * 5 / 4);
  EXPECT_EQ(now.cached_blocks, 1);
  EXPECT_EQ(now.in_use_bytes, before.in_use_bytes);
  EXPECT_EQ(now.misses - before.misses, 1);
  {
    const at::Tensor t = floats(kMiB + 1024);  // the same class
    EXPECT_EQ(t.data_ptr(), first);
    EXPECT_EQ(buffer_pool_stats().cached_bytes, 0);
  }
  now = buffer_pool_stats();
  EXPECT_EQ(now.hits - before.hits, 1);
  EXPECT_EQ(now.misses - before.misses, 1);
  const at::Tensor other = floats(kMiB * 2);  // another class: a new block
  EXPECT_NE(other.data_ptr(), first);
  EXPECT_EQ(buffer_pool_stats().misses - before.misses, 2);
}

TEST(BufferPoolTest, KeepsToItsCapacityEvictingTheLeastRecentlyReturned) {
  const ScopedPool pool(3 * kMiB);
  std::vector<at::Tensor> tensors;
  std::vector<void*> addresses;
  for (int i = 0; i < 4; ++i) {
    tensors.push_back(floats(kMiB));
    addresses.push_back(tensors.back().data_ptr());
  }
  tensors.clear();  // returned in order 0, 1, 2, 3: block 0 is evicted
  BufferPoolStats stats = buffer_pool_stats();
  EXPECT_EQ(stats.capacity_bytes, 3 * kMiB);
  EXPECT_EQ(stats.cached_bytes, 3 * kMiB);
  EXPECT_EQ(stats.cached_blocks, 3);
  // The most recently returned block is handed out first.
  EXPECT_EQ(floats(kMiB).data_ptr(), addresses[3]);
  // A block larger than the whole capacity is freed on return.
  floats(4 * kMiB);
  EXPECT_EQ(buffer_pool_stats().cached_bytes, 3 * kMiB);
  set_buffer_pool_capacity(kMiB + kMiB / 2);
  stats = buffer_pool_stats();
  EXPECT_EQ(stats.cached_bytes, kMiB);
  EXPECT_EQ(stats.cached_blocks, 1);
  set_buffer_pool_capacity(0);  // caching off
  floats(kMiB);
  EXPECT_EQ(buffer_pool_stats().cached_bytes, 0);
  DTENSOR_EXPECT_ERROR(set_buffer_pool_capacity(-1),
                       "buffer pool capacity: expected at least 0 bytes, found -1");
}

TEST(BufferPoolTest, ReleaseFreesIdleBlocksAndLeavesBlocksInUse) {
  const ScopedPool pool(16 * kMiB);
  const at::Tensor kept = floats(2 * kMiB);
  floats(kMiB);
  EXPECT_EQ(buffer_pool_stats().cached_bytes, kMiB);
  release_cached_buffers();
  EXPECT_EQ(buffer_pool_stats().cached_bytes, 0);
  EXPECT_EQ(buffer_pool_stats().cached_blocks, 0);
  kept.fill_(3);
  EXPECT_EQ(kept.sum().item<float>(), 3.0f * 2 * kMiB / 4);
}

TEST(BufferPoolTest, ATensorFreedOnAnotherThreadReturnsItsBlock) {
  const ScopedPool pool(16 * kMiB);
  at::Tensor t = floats(kMiB);
  void* address = t.data_ptr();
  std::thread([moved = std::move(t)]() mutable { moved = at::Tensor(); }).join();
  EXPECT_EQ(buffer_pool_stats().cached_bytes, kMiB);
  EXPECT_EQ(floats(kMiB).data_ptr(), address);
}

// A thread asking for a block takes one it returned itself before a newer
// one another thread returned (its memory is likelier in this core's cache);
// with none of its own, the newest.
TEST(BufferPoolTest, AThreadTakesBackTheBlockItReturned) {
  const ScopedPool pool(16 * kMiB);
  at::Tensor mine = floats(kMiB);
  at::Tensor theirs = floats(kMiB);
  void* mine_address = mine.data_ptr();
  void* their_address = theirs.data_ptr();
  mine = at::Tensor();
  std::thread([moved = std::move(theirs)]() mutable { moved = at::Tensor(); }).join();
  EXPECT_EQ(buffer_pool_stats().cached_blocks, 2);
  const at::Tensor first = floats(kMiB);
  EXPECT_EQ(first.data_ptr(), mine_address);
  EXPECT_EQ(floats(kMiB).data_ptr(), their_address);
}

TEST(BufferPoolTest, ThreadsSharingThePoolNeverExceedTheBoundNorLeak) {
  const ScopedPool pool(2 * kMiB);
  const int64_t in_use_before = buffer_pool_stats().in_use_bytes;
  std::vector<std::thread> threads;
  std::vector<int> over_bound(4, 0);
  for (int thread = 0; thread < 4; ++thread) {
    threads.emplace_back([thread, &over_bound] {
      std::vector<at::Tensor> held;
      for (int i = 0; i < 200; ++i) {
        held.push_back(floats((1 + (i * 7 + thread) % 9) * 64 * 1024));
        held.back().fill_(static_cast<float>(i));
        if (held.size() > 3) held.erase(held.begin());
        over_bound[thread] += buffer_pool_stats().cached_bytes > 2 * kMiB;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const BufferPoolStats after = buffer_pool_stats();
  EXPECT_EQ(over_bound, std::vector<int>(4, 0));
  EXPECT_LE(after.cached_bytes, 2 * kMiB);
  EXPECT_EQ(after.in_use_bytes, in_use_before);
  EXPECT_GT(after.hits, 0);
}

// Run by the unit_buffer_pool_environment CTest entry, which sets the
// variable before the pool's first use; skipped elsewhere.
TEST(BufferPoolTest, ReadsItsCapacityFromTheEnvironment) {
  const char* value = std::getenv("DTENSOR_BUFFER_POOL_CAPACITY");
  if (value == nullptr) GTEST_SKIP() << "DTENSOR_BUFFER_POOL_CAPACITY is not set";
  EXPECT_EQ(buffer_pool_capacity(), std::strtoll(value, nullptr, 10));
}

}  // namespace
}  // namespace dtensor
