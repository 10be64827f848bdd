// Copyright 2026 The dtensor Authors.
//
// rules/decomposition.h (<dtensor/rules/decomposition.h>): operators that run
// as other operators on DTensors, registered per ATen operator.
//
// Some ops take inputs no single strategy row can describe: the `_foreach_*`
// ops get lists whose elements each have their own layout. Such an op
// registers a decomposition instead of strategies: it receives the call's
// arguments (DTensors as they are) and replaces them by the op's results,
// calling other ops, each of which propagates on its own. An op with a
// decomposition uses nothing else.
//
//   dtensor::decompositions().add("aten::_foreach_add.List", run_per_element);
#pragma once

#include <functional>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <dtensor/base/registry.h>

namespace dtensor {

using Decomposition = std::function<void(const c10::OperatorHandle& op, torch::jit::Stack& stack)>;

// Decompositions by operator name; one per op.
Registry<Decomposition>& decompositions();

}  // namespace dtensor
