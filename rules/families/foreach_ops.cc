// Copyright 2026 The dtensor Authors.
//
// rules/families/foreach_ops.cc: the `_foreach_*` operators (the list math
// of optimizers) on DTensors.
//
// The elements of one list may have different shapes and layouts (a
// column-sharded weight next to a replicated bias), which no single sharding
// row can describe. So `_foreach_X` runs the per-element op `X` on element i
// of every list argument, through the DTensor dispatcher: each element
// propagates (and hits the propagation cache) on its own, exactly as if the
// user had written the loop. The per-element op is found from the schemas
// once, at load time: `_foreach_add_.List(Tensor[] self, Tensor[] other, *,
// Scalar alpha)` pairs with `add_.Tensor(Tensor self, Tensor other, *, Scalar
// alpha)` because every Tensor[] / Scalar[] argument meets a Tensor / Scalar
// in the same position and every other argument meets its own type; trailing
// per-element arguments take their defaults.
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/base/op_name.h>
#include <dtensor/rules/decomposition.h>
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

constexpr std::string_view kForeachPrefix = "aten::_foreach_";

// How one argument of the per-element op gets its value from the foreach call.
enum class Source {
  kListElement,    // element i of a Tensor[] or Scalar[] argument
  kTensorElement,  // element i of a 1-D tensor of scalars, as a Scalar
  kSame,           // the foreach argument itself
  kDefault,        // the per-element op's default (no foreach argument)
};

struct ElementOp {
  c10::OperatorHandle op;
  std::vector<Source> sources;  // one per per-element argument
};

bool is_list_of(const c10::TypePtr& type, c10::TypeKind element) {
  return type->kind() == c10::TypeKind::ListType &&
         type->expectRef<c10::ListType>().getElementType()->kind() == element;
}

// How argument `element_arg` of the per-element op is fed from `foreach_arg`.
std::optional<Source> source_of(const c10::Argument& foreach_arg,
                                const c10::Argument& element_arg) {
  const c10::TypePtr& from = foreach_arg.type();
  const c10::TypeKind to = element_arg.type()->kind();
  if (to == c10::TypeKind::TensorType && is_list_of(from, c10::TypeKind::TensorType)) {
    return Source::kListElement;
  }
  if (to == c10::TypeKind::NumberType && is_list_of(from, c10::TypeKind::NumberType)) {
    return Source::kListElement;
  }
  if (to == c10::TypeKind::NumberType && from->kind() == c10::TypeKind::TensorType) {
    return Source::kTensorElement;
  }
  if (*from == *element_arg.type()) return Source::kSame;
  return std::nullopt;
}

bool returns_match(const c10::FunctionSchema& foreach_schema,
                   const c10::FunctionSchema& element_schema) {
  const auto& element_returns = element_schema.returns();
  if (element_returns.size() != 1 ||
      element_returns[0].type()->kind() != c10::TypeKind::TensorType) {
    return false;
  }
  const auto& returns = foreach_schema.returns();
  if (returns.empty()) return element_schema.is_mutable();  // an in-place foreach
  return returns.size() == 1 && is_list_of(returns[0].type(), c10::TypeKind::TensorType) &&
         !element_schema.is_mutable();
}

// The argument sources when `element` computes one element of `foreach`.
std::optional<std::vector<Source>> pair_arguments(const c10::FunctionSchema& foreach_schema,
                                                  const c10::FunctionSchema& element_schema) {
  const auto& from = foreach_schema.arguments();
  const auto& to = element_schema.arguments();
  if (!returns_match(foreach_schema, element_schema)) return std::nullopt;
  std::vector<Source> sources;
  for (size_t a = 0; a < to.size(); ++a) {
    std::optional<Source> source =
        a < from.size()
            ? source_of(from[a], to[a])
            : (to[a].default_value() ? std::optional<Source>(Source::kDefault) : std::nullopt);
    if (!source) return std::nullopt;
    sources.push_back(*source);
  }
  // Extra foreach arguments (a dtype= the per-element op lacks) must be
  // optional; each call checks they are None.
  for (size_t a = to.size(); a < from.size(); ++a) {
    if (from[a].type()->kind() != c10::TypeKind::OptionalType) return std::nullopt;
  }
  return sources;
}

// Every operator overload of this libtorch, by "aten::name".
absl::flat_hash_map<std::string, std::vector<c10::OperatorName>> overloads_by_name() {
  absl::flat_hash_map<std::string, std::vector<c10::OperatorName>> out;
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    out[name.name].push_back(name);
  }
  return out;
}

// The overload the foreach overload most likely means, tried first.
std::string preferred_overload(const std::string& foreach_overload) {
  if (foreach_overload == "List") return "Tensor";
  if (foreach_overload == "ScalarList") return "Scalar";
  return foreach_overload;
}

std::optional<ElementOp> find_element_op(
    const c10::OperatorHandle& foreach_op,
    const absl::flat_hash_map<std::string, std::vector<c10::OperatorName>>& overloads) {
  const c10::OperatorName& name = foreach_op.operator_name();
  const std::string base = "aten::" + name.name.substr(kForeachPrefix.size());
  const auto found = overloads.find(base);
  if (found == overloads.end()) return std::nullopt;
  std::vector<c10::OperatorName> candidates = found->second;
  const std::string preferred = preferred_overload(name.overload_name);
  std::stable_partition(candidates.begin(), candidates.end(),
                        [&](const c10::OperatorName& c) { return c.overload_name == preferred; });
  // The pairing that reads fewest tensors as per-element scalars: a 0-dim
  // `other` of `_foreach_add.Tensor_out` is one value for every element
  // (add.out), not a tensor of one scalar per element (add.Scalar_out).
  std::optional<ElementOp> best;
  int64_t best_conversions = 0;
  for (const c10::OperatorName& candidate : candidates) {
    auto op = c10::Dispatcher::singleton().findOp(candidate);
    if (!op) continue;
    auto sources = pair_arguments(foreach_op.schema(), op->schema());
    if (!sources) continue;
    const int64_t conversions =
        std::count(sources->begin(), sources->end(), Source::kTensorElement);
    if (!best || conversions < best_conversions) {
      best = ElementOp{*op, std::move(*sources)};
      best_conversions = conversions;
    }
  }
  return best;
}

// The common length of the call's list arguments.
size_t list_length(const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> arguments,
                   const ElementOp& element) {
  std::vector<size_t> lengths;
  for (size_t a = 0; a < element.sources.size(); ++a) {
    if (element.sources[a] == Source::kListElement)
      lengths.push_back(arguments[a].toListRef().size());
    if (element.sources[a] == Source::kTensorElement)
      lengths.push_back(arguments[a].toTensor().numel());
  }
  DTENSOR_CHECK(!lengths.empty(), op_name_string(op.operator_name()),
                ": expected a list argument, found none");
  for (size_t length : lengths) {
    DTENSOR_CHECK(length == lengths.front(), op_name_string(op.operator_name()),
                  ": expected list arguments of one length, found lengths ",
                  absl::StrJoin(lengths, ", "));
  }
  return lengths.front();
}

void check_extra_arguments_are_none(const c10::OperatorHandle& op,
                                    c10::ArrayRef<c10::IValue> arguments, size_t used) {
  for (size_t a = used; a < arguments.size(); ++a) {
    DTENSOR_CHECK(arguments[a].isNone(), op_name_string(op.operator_name()), ": argument \"",
                  op.schema().arguments()[a].name(), "\" is not supported on DTensors; expected ",
                  "None, found ", arguments[a].tagKind());
  }
}

torch::jit::Stack element_arguments(const ElementOp& element, c10::ArrayRef<c10::IValue> arguments,
                                    size_t i) {
  torch::jit::Stack stack;
  const auto& schema_arguments = element.op.schema().arguments();
  for (size_t a = 0; a < element.sources.size(); ++a) {
    switch (element.sources[a]) {
      case Source::kListElement:
        stack.push_back(arguments[a].toListRef()[i]);
        break;
      case Source::kTensorElement:
        stack.push_back(arguments[a].toTensor().reshape(-1)[static_cast<int64_t>(i)].item());
        break;
      case Source::kSame:
        stack.push_back(arguments[a]);
        break;
      case Source::kDefault:
        stack.push_back(*schema_arguments[a].default_value());
        break;
    }
  }
  return stack;
}

Decomposition run_per_element(ElementOp element) {
  return [element = std::move(element)](const c10::OperatorHandle& op, torch::jit::Stack& stack) {
    const size_t num_arguments = op.schema().arguments().size();
    const std::vector<c10::IValue> arguments(stack.end() - num_arguments, stack.end());
    torch::jit::drop(stack, num_arguments);
    check_extra_arguments_are_none(op, arguments, element.sources.size());
    const size_t length = list_length(op, arguments, element);
    // Below autograd, as the DTensor kernel itself runs.
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    c10::List<at::Tensor> results;
    for (size_t i = 0; i < length; ++i) {
      torch::jit::Stack call = element_arguments(element, arguments, i);
      element.op.callBoxed(call);
      results.push_back(call.front().toTensor());
    }
    if (!op.schema().returns().empty()) stack.emplace_back(std::move(results));
  };
}

}  // namespace

DTENSOR_REGISTER(foreach_decompositions) {
  const auto overloads = overloads_by_name();
  for (const c10::OperatorName& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name.rfind(kForeachPrefix, 0) != 0) continue;
    auto op = c10::Dispatcher::singleton().findOp(name);
    if (!op) continue;
    std::optional<ElementOp> element = find_element_op(*op, overloads);
    if (!element) continue;  // none: calling it raises the usual "no sharding rule" error
    decompositions().add(op_name_string(name), run_per_element(std::move(*element)));
  }
}

}  // namespace dtensor
