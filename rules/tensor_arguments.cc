// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/tensor_arguments.h>

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

namespace dtensor {
namespace {

// Tensor?[] arguments (index, index_put) arrive as generic lists.
bool is_optional_tensor_list(const c10::IValue& value) {
  return value.isList() && !value.isTensorList() &&
         value.toList().elementType()->isSubtypeOf(*c10::OptionalType::ofTensor());
}

}  // namespace

void for_each_tensor_argument(c10::ArrayRef<c10::IValue> arguments,
                              const std::function<void(const at::Tensor&, size_t, int64_t)>& fn) {
  for (size_t a = 0; a < arguments.size(); ++a) {
    const c10::IValue& value = arguments[a];
    if (value.isTensor()) {
      if (value.toTensor().defined()) fn(value.toTensor(), a, -1);
    } else if (value.isTensorList() || is_optional_tensor_list(value)) {
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
                                       const std::function<at::Tensor(const at::Tensor&)>& fn) {
  torch::jit::Stack out(arguments.begin(), arguments.end());
  for (size_t a = 0; a < arguments.size(); ++a) {
    const c10::IValue& value = arguments[a];
    if (value.isTensor()) {
      if (value.toTensor().defined()) out[a] = fn(value.toTensor());
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      const c10::List<at::Tensor> tensors = value.toTensorList();
      // By index: a c10::List's elements are proxies, not references.
      for (size_t i = 0; i < tensors.size(); ++i) {
        const at::Tensor t = tensors.get(i);
        list.push_back(t.defined() ? fn(t) : t);
      }
      out[a] = list;
    } else if (is_optional_tensor_list(value)) {
      c10::List<c10::optional<at::Tensor>> list;
      for (const c10::IValue& e : value.toListRef()) {
        const bool defined = e.isTensor() && e.toTensor().defined();
        list.push_back(defined ? c10::optional<at::Tensor>(fn(e.toTensor())) : c10::nullopt);
      }
      out[a] = list;
    }
  }
  return out;
}

}  // namespace dtensor
