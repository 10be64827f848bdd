// Copyright 2026 The dtensor Authors.
//
// rules/tensor_arguments.h: the one walk over an operator's arguments that
// finds its tensors, in the order OpCall::inputs() lists them (Tensor[] and
// Tensor?[] elements one by one, undefined tensors skipped). The dispatcher,
// the propagation cache's shape inference and the rule verifier all use it,
// so they agree on which tensor is input i.
//
//   for_each_tensor_argument(args, [](const at::Tensor& t, size_t arg, int64_t list_index) {...});
//   torch::jit::Stack locals =
//       map_tensor_arguments(args, [](const at::Tensor& t) { return local(t); });
#pragma once

#include <cstdint>

#include <ATen/core/stack.h>

#include "absl/functional/function_ref.h"

namespace dtensor {

// Calls `fn(tensor, argument index, list index or -1)` for every defined tensor.
void for_each_tensor_argument(c10::ArrayRef<c10::IValue> arguments,
                              absl::FunctionRef<void(const at::Tensor&, size_t, int64_t)> fn);

// `arguments` with every defined tensor replaced by `fn(tensor)`, in the
// same order; lists keep their types.
torch::jit::Stack map_tensor_arguments(c10::ArrayRef<c10::IValue> arguments,
                                       absl::FunctionRef<at::Tensor(const at::Tensor&)> fn);

}  // namespace dtensor
