// Copyright 2026 The dtensor Authors.
//
// tests/support/call_op.h: calls an ATen operator by name with named
// arguments, the others at their schema defaults, through the whole
// dispatcher (autograd included). For ops whose C++ functions differ
// between libtorch versions or are missing from some (the fused attention
// kernels): a test skips when call_op says the op is absent.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <map>
#include <optional>
#include <string>

namespace dtensor::testing {

using NamedArguments = std::map<std::string, c10::IValue>;

inline bool op_exists(const std::string& name) {
  return c10::Dispatcher::singleton().findSchema({name, ""}).has_value();
}

// `name`'s returns; nullopt when this libtorch lacks the op.
inline std::optional<torch::jit::Stack> call_op(const std::string& name,
                                                const NamedArguments& arguments) {
  const auto op = c10::Dispatcher::singleton().findSchema({name, ""});
  if (!op.has_value()) return std::nullopt;
  torch::jit::Stack stack;
  size_t used = 0;
  for (const c10::Argument& argument : op->schema().arguments()) {
    const auto given = arguments.find(argument.name());
    if (given != arguments.end()) {
      stack.push_back(given->second);
      ++used;
    } else {
      TORCH_CHECK(argument.default_value().has_value(), name, ": no value for ", argument.name());
      stack.push_back(*argument.default_value());
    }
  }
  TORCH_CHECK(used == arguments.size(), name, ": an argument given has a name its schema lacks");
  op->callBoxed(stack);
  return stack;
}

}  // namespace dtensor::testing
