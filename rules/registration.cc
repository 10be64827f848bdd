// Copyright 2026 The dtensor Authors.
#include "rules/registration.h"

#include <ATen/core/dispatch/Dispatcher.h>

namespace dtensor {

bool operator_exists(std::string_view op_name) {
  const auto dot = op_name.find('.');
  const c10::OperatorName name(
      std::string(op_name.substr(0, dot)),
      dot == std::string_view::npos ? "" : std::string(op_name.substr(dot + 1)));
  return c10::Dispatcher::singleton().findOp(name).has_value();
}

int add_to_existing(RuleRegistry& registry, std::initializer_list<std::string_view> op_names,
                    const OpRule& rule) {
  int added = 0;
  for (std::string_view name : op_names) {
    if (!operator_exists(name)) continue;
    registry.add(name, rule);
    ++added;
  }
  return added;
}

}  // namespace dtensor
