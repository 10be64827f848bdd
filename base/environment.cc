// Copyright 2026 The dtensor Authors.
#include <dtensor/base/environment.h>

#include <cstdlib>

#include <dtensor/base/check.h>

namespace dtensor {

int64_t whole_number_from_environment(const char* env_var, int64_t default_value, int64_t minimum,
                                      std::string_view expected) {
  const char* value = std::getenv(env_var);
  if (value == nullptr || *value == '\0') return default_value;
  char* end = nullptr;
  const long long number = std::strtoll(value, &end, 10);
  DTENSOR_CHECK(end != value && *end == '\0' && number >= minimum, env_var, ": expected ", expected,
                ", found \"", value, "\"");
  return number;
}

}  // namespace dtensor
