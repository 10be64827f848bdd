// Copyright 2026 The dtensor Authors.
//
// rules/registration.h: helpers for rule families registering many ops.
#pragma once

#include <initializer_list>
#include <string_view>

#include "rules/registry.h"

namespace dtensor {

// Adds `rule` to every op of `op_names` that this libtorch has (op sets
// differ between versions); returns how many it added.
int add_to_existing(RuleRegistry& registry, std::initializer_list<std::string_view> op_names,
                    const OpRule& rule);

// Whether this libtorch has the operator "ns::name.overload".
bool operator_exists(std::string_view op_name);

}  // namespace dtensor
