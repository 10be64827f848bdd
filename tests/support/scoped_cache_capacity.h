// Copyright 2026 The dtensor Authors.
//
// tests/support/scoped_cache_capacity.h: a cache capacity (every thread's)
// set for one scope and restored after it, for tests that fill a cache.
//
//   const testing::ScopedCacheCapacity small(plan_cache_capacity, set_plan_cache_capacity, 3);
#pragma once

#include <cstdint>

namespace dtensor::testing {

class ScopedCacheCapacity {
 public:
  ScopedCacheCapacity(int64_t (*capacity)(), void (*set_capacity)(int64_t), int64_t value)
      : set_capacity_(set_capacity), saved_(capacity()) {
    set_capacity_(value);
  }
  ~ScopedCacheCapacity() { set_capacity_(saved_); }
  ScopedCacheCapacity(const ScopedCacheCapacity&) = delete;
  ScopedCacheCapacity& operator=(const ScopedCacheCapacity&) = delete;

 private:
  void (*set_capacity_)(int64_t);
  int64_t saved_;
};

}  // namespace dtensor::testing
