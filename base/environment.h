// Copyright 2026 The dtensor Authors.
//
// base/environment.h (<dtensor/base/environment.h>): the settings dtensor
// reads from environment variables, parsed one way.
//
// A limit a user may set through the environment (a cache's capacity, the
// buffer pool's bound) is read with `whole_number_from_environment`, so every
// such variable takes the same spelling and fails with the same message:
//
//   static const int64_t capacity = whole_number_from_environment(
//       "DTENSOR_PLAN_CACHE_CAPACITY", 4096, 1, "a positive whole number of cache entries");
#pragma once

#include <cstdint>
#include <string_view>

namespace dtensor {

// The value of the environment variable `env_var`, or `default_value` when it
// is unset or empty. Throws dtensor::Error naming the variable and `expected`
// unless the value is a decimal whole number of at least `minimum`.
int64_t whole_number_from_environment(const char* env_var, int64_t default_value, int64_t minimum,
                                      std::string_view expected);

}  // namespace dtensor
