// Copyright 2026 The dtensor Authors.
//
// The bounded cache (base/lru_cache.h): least recently used entries go
// first, the capacity is never exceeded, lookups may borrow their key, and
// the limits and generations empty every thread's cache.
#include <dtensor/base/lru_cache.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using Cache = LruCache<int, std::shared_ptr<const std::string>>;

std::shared_ptr<const std::string> text(const char* value) {
  return std::make_shared<const std::string>(value);
}

// The keys present, by probing 0..9 (a probe counts as a use: call last).
std::vector<int> keys_of(Cache& cache) {
  std::vector<int> keys;
  for (int k = 0; k < 10; ++k) {
    if (cache.find(k) != nullptr) keys.push_back(k);
  }
  return keys;
}

TEST(LruCacheTest, EvictsTheLeastRecentlyUsedEntry) {
  Cache cache(3);
  cache.insert(1, text("one"));
  cache.insert(2, text("two"));
  cache.insert(3, text("three"));
  ASSERT_NE(cache.find(1), nullptr);  // 2 is now the least recently used
  cache.insert(4, text("four"));
  EXPECT_EQ(cache.size(), 3);
  EXPECT_EQ(cache.find(2), nullptr);
  EXPECT_EQ(*cache.find(1)->get(), "one");
  EXPECT_EQ(keys_of(cache), (std::vector<int>{1, 3, 4}));
}

TEST(LruCacheTest, NeverHoldsMoreThanItsCapacity) {
  Cache cache(4);
  for (int k = 0; k < 100; ++k) {
    cache.insert(k % 10, text("x"));
    EXPECT_LE(cache.size(), 4);
  }
  EXPECT_EQ(cache.size(), 4);
  // The last four inserted: 96..99 mod 10.
  EXPECT_EQ(keys_of(cache), (std::vector<int>{6, 7, 8, 9}));
}

TEST(LruCacheTest, InsertKeepsAPresentValue) {
  Cache cache(2);
  const auto first = text("first");
  const std::shared_ptr<const std::string>* stored = &cache.insert(1, first);
  EXPECT_EQ(stored, cache.find(1));
  EXPECT_EQ(cache.insert(1, text("second")), first);
  EXPECT_EQ(cache.size(), 1);
}

TEST(LruCacheTest, AnEvictedValueStaysValidForItsHolder) {
  Cache cache(1);
  const std::shared_ptr<const std::string> held = cache.insert(1, text("held"));
  cache.insert(2, text("other"));
  EXPECT_EQ(cache.find(1), nullptr);
  EXPECT_EQ(*held, "held");
  EXPECT_EQ(held.use_count(), 1);
}

TEST(LruCacheTest, SetCapacityTrimsTheLeastRecentlyUsedAndRefusesZero) {
  Cache cache(4);
  for (int k = 0; k < 4; ++k) cache.insert(k, text("x"));
  ASSERT_NE(cache.find(0), nullptr);
  cache.set_capacity(2);
  EXPECT_EQ(cache.capacity(), 2);
  EXPECT_EQ(keys_of(cache), (std::vector<int>{0, 3}));
  DTENSOR_EXPECT_ERROR(cache.set_capacity(0), "cache capacity: expected at least 1 entry, found 0");
  DTENSOR_EXPECT_ERROR(Cache(-1), "cache capacity: expected at least 1 entry, found -1");
}

// Keys looked up through a view that borrows them, as the plan cache does.
struct NameHash {
  using is_transparent = void;
  size_t operator()(std::string_view name) const { return absl::HashOf(name); }
};
struct NameEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

TEST(LruCacheTest, LooksUpThroughABorrowingKey) {
  LruCache<std::string, int, NameHash, NameEq> cache(2);
  cache.insert("alpha", 1);
  cache.insert("beta", 2);
  const std::string_view alpha = "alpha";
  ASSERT_NE(cache.find(alpha), nullptr);
  EXPECT_EQ(*cache.find(alpha), 1);
  cache.insert("gamma", 3);  // evicts beta, used least recently
  EXPECT_EQ(cache.find(std::string_view("beta")), nullptr);
  EXPECT_EQ(*cache.find(std::string_view("gamma")), 3);
}

TEST(LruCacheTest, SyncAppliesTheLimitsAndTheGeneration) {
  CacheLimits limits("DTENSOR_TEST_UNSET_CACHE_CAPACITY", 3);
  EXPECT_EQ(limits.capacity(), 3);
  Cache cache(limits.capacity());
  cache.sync(limits, 0);
  for (int k = 0; k < 3; ++k) cache.insert(k, text("x"));
  cache.sync(limits, 0);
  EXPECT_EQ(cache.size(), 3);
  limits.set_capacity(2);
  cache.sync(limits, 0);
  EXPECT_EQ(cache.capacity(), 2);
  EXPECT_EQ(cache.size(), 2);
  limits.clear_all();
  cache.sync(limits, 0);
  EXPECT_EQ(cache.size(), 0);
  cache.insert(7, text("x"));
  cache.sync(limits, 1);  // what the values derive from changed
  EXPECT_EQ(cache.size(), 0);
  DTENSOR_EXPECT_ERROR(limits.set_capacity(0),
                       "cache capacity: expected at least 1 entry, found 0");
}

TEST(LruCacheTest, LimitsReadTheirCapacityFromTheEnvironment) {
  ASSERT_EQ(setenv("DTENSOR_TEST_CACHE_CAPACITY", "17", 1), 0);
  EXPECT_EQ(CacheLimits("DTENSOR_TEST_CACHE_CAPACITY", 3).capacity(), 17);
  for (const char* bad : {"0", "-2", "12x", "many"}) {
    ASSERT_EQ(setenv("DTENSOR_TEST_CACHE_CAPACITY", bad, 1), 0);
    DTENSOR_EXPECT_ERROR(CacheLimits("DTENSOR_TEST_CACHE_CAPACITY", 3),
                         std::string("DTENSOR_TEST_CACHE_CAPACITY: expected a positive whole "
                                     "number of cache entries, found \"") +
                             bad + "\"");
  }
  ASSERT_EQ(unsetenv("DTENSOR_TEST_CACHE_CAPACITY"), 0);
  EXPECT_EQ(CacheLimits("DTENSOR_TEST_CACHE_CAPACITY", 3).capacity(), 3);
}

}  // namespace
}  // namespace dtensor
