// Copyright 2026 The dtensor Authors.
//
// The three registries keyed by operator name.
#include <dtensor/base/op_name.h>
#include <dtensor/rules/decomposition.h>
#include <dtensor/rules/local_kernel.h>
#include <dtensor/rules/strategy.h>

namespace dtensor {
namespace {

void check_op_name(std::string_view what, std::string_view key) { parse_op_name(key, what); }

}  // namespace

Registry<Strategy>& strategies() {
  static auto* registry = new Registry<Strategy>(
      "strategy registry", Registry<Strategy>::PerKey::kJoinedValues, check_op_name);
  return *registry;
}

Registry<LocalKernel>& local_kernels() {
  static auto* registry = new Registry<LocalKernel>(
      "local kernel registry", Registry<LocalKernel>::PerKey::kOneValue, check_op_name);
  return *registry;
}

Registry<Decomposition>& decompositions() {
  static auto* registry = new Registry<Decomposition>(
      "decomposition registry", Registry<Decomposition>::PerKey::kOneValue, check_op_name);
  return *registry;
}

}  // namespace dtensor
