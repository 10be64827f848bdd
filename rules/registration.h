// Copyright 2026 The dtensor Authors.
//
// rules/registration.h (<dtensor/rules/registration.h>): registering one
// value for many operators, skipping those this libtorch lacks.
//
//   DTENSOR_REGISTER(pointwise_strategies) {
//     dtensor::add_to_existing(dtensor::strategies(), {"aten::relu", "aten::gelu"}, unary);
//   }
#pragma once

#include <initializer_list>
#include <string_view>

#include <dtensor/base/op_name.h>
#include <dtensor/base/registry.h>

namespace dtensor {

// Adds `value` under every op of `op_names` that this libtorch has (op sets
// differ between versions); returns how many it added.
template <typename Value>
int add_to_existing(Registry<Value>& registry, std::initializer_list<std::string_view> op_names,
                    const Value& value) {
  int added = 0;
  for (std::string_view name : op_names) {
    if (!operator_exists(name)) continue;
    registry.add(name, value);
    ++added;
  }
  return added;
}

}  // namespace dtensor
