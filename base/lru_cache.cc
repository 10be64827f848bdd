// Copyright 2026 The dtensor Authors.
#include <dtensor/base/lru_cache.h>

#include <cstdlib>

namespace dtensor {
namespace {

int64_t capacity_from_environment(const char* env_var, int64_t default_capacity) {
  const char* value = std::getenv(env_var);
  if (value == nullptr || *value == '\0') return default_capacity;
  char* end = nullptr;
  const long long capacity = std::strtoll(value, &end, 10);
  DTENSOR_CHECK(end != value && *end == '\0' && capacity > 0, env_var,
                ": expected a positive whole number of cache entries, found \"", value, "\"");
  return capacity;
}

}  // namespace

CacheLimits::CacheLimits(const char* env_var, int64_t default_capacity)
    : capacity_(capacity_from_environment(env_var, default_capacity)) {}

void CacheLimits::set_capacity(int64_t capacity) {
  DTENSOR_CHECK(capacity >= 1, "cache capacity: expected at least 1 entry, found ", capacity);
  capacity_.store(capacity, std::memory_order_relaxed);
}

}  // namespace dtensor
