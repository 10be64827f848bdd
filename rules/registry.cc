// Copyright 2026 The dtensor Authors.
#include "rules/registry.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "dtensor/base/check.h"

namespace dtensor {
namespace {

void check_op_name(std::string_view op_name) {
  DTENSOR_CHECK(op_name.find("::") != std::string_view::npos && op_name.back() != '.',
                "rule registry: expected an operator name like \"aten::add.Tensor\", found \"",
                op_name, "\"");
}

void check_rule(std::string_view op_name, const OpRule& rule) {
  DTENSOR_CHECK(static_cast<bool>(rule.strategy) != static_cast<bool>(rule.decomposition),
                "rule registry: ", op_name,
                ": expected a rule with either a strategy or a decomposition, found ",
                rule.strategy ? "both" : "neither");
}

}  // namespace

RuleRegistry& RuleRegistry::global() {
  static RuleRegistry* registry = new RuleRegistry();
  return *registry;
}

void RuleRegistry::add(std::string_view op_name, OpRule rule) {
  check_op_name(op_name);
  check_rule(op_name, rule);
  absl::MutexLock lock(&mutex_);
  auto& slot = rules_[std::string(op_name)];
  auto rules = slot ? std::make_shared<std::vector<OpRule>>(*slot)
                    : std::make_shared<std::vector<OpRule>>();
  rules->push_back(std::move(rule));
  slot = std::move(rules);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void RuleRegistry::override_rule(std::string_view op_name, OpRule rule) {
  check_op_name(op_name);
  check_rule(op_name, rule);
  absl::MutexLock lock(&mutex_);
  rules_[std::string(op_name)] =
      std::make_shared<const std::vector<OpRule>>(std::vector<OpRule>{std::move(rule)});
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

void RuleRegistry::clear(std::string_view op_name) {
  absl::MutexLock lock(&mutex_);
  rules_.erase(std::string(op_name));
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

std::shared_ptr<const std::vector<OpRule>> RuleRegistry::find(
    const c10::OperatorName& name) const {
  const std::string key = full_op_name(name);
  absl::ReaderMutexLock lock(&mutex_);
  auto it = rules_.find(key);
  return it == rules_.end() ? nullptr : it->second;
}

std::vector<std::string> RuleRegistry::op_names() const {
  absl::ReaderMutexLock lock(&mutex_);
  std::vector<std::string> names;
  for (const auto& [name, rules] : rules_) names.push_back(name);
  // The map's order differs between processes; callers iterating on every
  // rank need one order.
  std::sort(names.begin(), names.end());
  return names;
}

std::string full_op_name(const c10::OperatorName& name) {
  return name.overload_name.empty() ? name.name : absl::StrCat(name.name, ".", name.overload_name);
}

}  // namespace dtensor
