// Copyright 2026 The dtensor Authors.
#include <dtensor/base/registry.h>

namespace dtensor {
namespace {

std::atomic<uint64_t>& generation() {
  static std::atomic<uint64_t> value{0};
  return value;
}

}  // namespace

uint64_t registries_generation() { return generation().load(std::memory_order_acquire); }

namespace base_internal {

void bump_registries_generation() { generation().fetch_add(1, std::memory_order_acq_rel); }

}  // namespace base_internal
}  // namespace dtensor
