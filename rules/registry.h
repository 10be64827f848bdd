// Copyright 2026 The dtensor Authors.
//
// rules/registry.h: where sharding rules live, keyed by ATen operator name
// and overload ("aten::add.Tensor").
//
// Built-in rule families register themselves at load time with
// DTENSOR_REGISTER_RULES; users add to them at any time:
//
//   // Join the built-in strategies of an op (rows are offered together):
//   dtensor::RuleRegistry::global().add("aten::mm", my_rule);
//   // Replace them, explicitly:
//   dtensor::RuleRegistry::global().override_rule("aten::mm", my_rule);
//   // Rules for a custom operator work the same way:
//   dtensor::RuleRegistry::global().add("mylib::fused_gelu", gelu_rule);
//
// Every change clears the propagation caches (the next call of each op
// propagates afresh). Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "rules/rule.h"

namespace dtensor {

class RuleRegistry {
 public:
  static RuleRegistry& global();

  // Adds `rule` to the rules of `op_name` ("ns::name" or "ns::name.overload").
  void add(std::string_view op_name, OpRule rule);
  // Replaces every rule of `op_name` by `rule`.
  void override_rule(std::string_view op_name, OpRule rule);
  // Removes every rule of `op_name` (tests; ops then have no rule).
  void clear(std::string_view op_name);

  // The rules of `name` (a snapshot; empty when none).
  std::shared_ptr<const std::vector<OpRule>> find(const c10::OperatorName& name) const;
  // Bumped by every change; propagation caches compare it.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  // Every op name with at least one rule, sorted.
  std::vector<std::string> op_names() const;

 private:
  mutable absl::Mutex mutex_;
  absl::flat_hash_map<std::string, std::shared_ptr<const std::vector<OpRule>>> rules_
      ABSL_GUARDED_BY(mutex_);
  std::atomic<uint64_t> generation_{0};
};

// "aten::add.Tensor" for an operator name.
std::string full_op_name(const c10::OperatorName& name);

}  // namespace dtensor

// Registers the built-in rules of one family at load time:
//
//   DTENSOR_REGISTER_RULES(pointwise) {
//     registry.add("aten::relu", unary_rule());
//   }
#define DTENSOR_REGISTER_RULES(family)                                                      \
  static void dtensor_register_rules_##family(::dtensor::RuleRegistry& registry);           \
  static const bool dtensor_rules_registered_##family =                                     \
      (dtensor_register_rules_##family(::dtensor::RuleRegistry::global()), true);           \
  static void dtensor_register_rules_##family(::dtensor::RuleRegistry& registry)
