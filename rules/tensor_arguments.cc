// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/tensor_arguments.h>

#include <algorithm>

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

namespace dtensor {
namespace {

// Whether `value` is a Tensor[] or a Tensor?[] (index, index_put: a generic
// list) holding a tensor. Lists without one (int[], only None) hold nothing
// to visit, and skip the type checks, which cost as much as the rest of a
// cached op's bookkeeping.
bool holds_tensor_list(const c10::IValue& value) {
  if (!value.isList()) return false;
  const c10::ArrayRef<c10::IValue> elements = value.toListRef();
  return std::any_of(elements.begin(), elements.end(),
                     [](const c10::IValue& e) { return e.isTensor(); }) &&
         (value.isTensorList() ||
          value.toList().elementType()->isSubtypeOf(*c10::OptionalType::ofTensor()));
}

}  // namespace

void for_each_tensor_argument(c10::ArrayRef<c10::IValue> arguments,
                              absl::FunctionRef<void(const at::Tensor&, size_t, int64_t)> fn) {
  for (size_t a = 0; a < arguments.size(); ++a) {
    const c10::IValue& value = arguments[a];
    if (value.isTensor()) {
      if (value.toTensor().defined()) fn(value.toTensor(), a, -1);
    } else if (holds_tensor_list(value)) {
      const auto elements = value.toListRef();
      for (size_t i = 0; i < elements.size(); ++i) {
        if (elements[i].isTensor() && elements[i].toTensor().defined()) {
          fn(elements[i].toTensor(), a, static_cast<int64_t>(i));
        }
      }
    }
  }
}

torch::jit::Stack map_tensor_arguments(c10::ArrayRef<c10::IValue> arguments,
                                       absl::FunctionRef<at::Tensor(const at::Tensor&)> fn) {
  torch::jit::Stack out;
  out.reserve(arguments.size());
  for (const c10::IValue& value : arguments) {
    if (value.isTensor() && value.toTensor().defined()) {
      out.emplace_back(fn(value.toTensor()));
    } else if (!holds_tensor_list(value)) {
      out.push_back(value);
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      const c10::List<at::Tensor> tensors = value.toTensorList();
      // By index: a c10::List's elements are proxies, not references.
      for (size_t i = 0; i < tensors.size(); ++i) {
        const at::Tensor t = tensors.get(i);
        list.push_back(t.defined() ? fn(t) : t);
      }
      out.emplace_back(list);
    } else {
      c10::List<c10::optional<at::Tensor>> list;
      for (const c10::IValue& e : value.toListRef()) {
        const bool defined = e.isTensor() && e.toTensor().defined();
        list.push_back(defined ? c10::optional<at::Tensor>(fn(e.toTensor())) : c10::nullopt);
      }
      out.emplace_back(list);
    }
  }
  return out;
}

}  // namespace dtensor
