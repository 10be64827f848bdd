// Copyright 2026 The dtensor Authors.
#include <dtensor/base/lru_cache.h>

#include <dtensor/base/environment.h>

namespace dtensor {

CacheLimits::CacheLimits(const char* env_var, int64_t default_capacity)
    : capacity_(whole_number_from_environment(env_var, default_capacity, 1,
                                              "a positive whole number of cache entries")) {}

void CacheLimits::set_capacity(int64_t capacity) {
  DTENSOR_CHECK(capacity >= 1, "cache capacity: expected at least 1 entry, found ", capacity);
  capacity_.store(capacity, std::memory_order_relaxed);
}

}  // namespace dtensor
