// Copyright 2026 The dtensor Authors.
#include <dtensor/core/random.h>

#include <optional>

#include <ATen/CPUGeneratorImpl.h>

#include <dtensor/base/check.h>

namespace dtensor {
namespace {

std::optional<at::Generator>& this_rank_generator() {
  thread_local std::optional<at::Generator> generator;
  return generator;
}

}  // namespace

void manual_seed(uint64_t seed) {
  this_rank_generator() = at::make_generator<at::CPUGeneratorImpl>(seed);
}

at::Generator rank_generator() {
  const std::optional<at::Generator>& generator = this_rank_generator();
  DTENSOR_CHECK(generator.has_value(),
                "random op on a DTensor: expected dtensor::manual_seed(seed) to have been called "
                "on this rank (the same seed on every rank), found no seed; unseeded ranks would "
                "draw different numbers");
  return *generator;
}

}  // namespace dtensor
