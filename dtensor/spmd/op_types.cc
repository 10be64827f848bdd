// Copyright 2026 The dtensor Authors.
//
// dtensor/spmd/op_types.cc: the kernel a ScopedTypeCheck routes every ATen
// op through: it derives the outputs' SPMD types from the inputs' by the
// rules of dtensor/spmd/types.h (or raises), runs the op below it, and types
// what it returns. Linearity in Partial inputs is read from the sharding rule
// registry, never listed here.
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/base/op_name.h>
#include <dtensor/dispatch/dispatch.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/rules/decomposition.h>
#include <dtensor/rules/op_call.h>
#include <dtensor/rules/strategy.h>
#include <dtensor/rules/tensor_arguments.h>
#include <dtensor/spmd/type_table.h>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor::spmd {
namespace {

bool has(const std::vector<std::optional<Type>>& types, Type type) {
  return std::find(types.begin(), types.end(), std::optional<Type>(type)) != types.end();
}

// The first input of `type`.
size_t first(const std::vector<std::optional<Type>>& types, Type type) {
  return std::find(types.begin(), types.end(), std::optional<Type>(type)) - types.begin();
}

// The first typed input that is not `type`, or types.size().
size_t first_other(const std::vector<std::optional<Type>>& types, Type type) {
  for (size_t i = 0; i < types.size(); ++i) {
    if (types[i] && *types[i] != type) return i;
  }
  return types.size();
}

// One call's typing: its tensor inputs' types, and its outputs' per mesh dim.
class OpTyping {
 public:
  OpTyping(const c10::OperatorHandle& op, std::string name, c10::ArrayRef<c10::IValue> arguments,
           const TypeTable& table)
      : op_(op), name_(std::move(name)), arguments_(arguments), table_(table) {
    for_each_tensor_argument(arguments, [&](const at::Tensor& t, size_t, int64_t) {
      inputs_.push_back(table.find(t));
      shapes_.push_back(t.sizes().vec());
      dtypes_.push_back(t.scalar_type());
      typed_ = typed_ || inputs_.back() != nullptr;
    });
  }

  bool typed() const { return typed_; }

  // Per return of the op, its types. Throws on a type error.
  std::vector<Types> output_types() const {
    const size_t returns = op_.schema().returns().size();
    std::vector<Types> out(returns, Types(table_.mesh().ndim()));
    for (int64_t m = 0; m < table_.mesh().ndim(); ++m) {
      const std::vector<Type> on_m = types_on(m);
      for (size_t j = 0; j < returns; ++j) out[j][m] = on_m[j];
    }
    return out;
  }

 private:
  // Every return's type on mesh dim m.
  std::vector<Type> types_on(int64_t m) const {
    std::vector<std::optional<Type>> types;
    for (const Types* t : inputs_) types.push_back(t ? std::optional<Type>((*t)[m]) : std::nullopt);
    const size_t returns = op_.schema().returns().size();
    if (has(types, Type::kInvariant)) {
      const size_t other = first_other(types, Type::kInvariant);
      DTENSOR_CHECK(other == types.size(), where(m, types), ": input ",
                    first(types, Type::kInvariant), " is ", type_name(Type::kInvariant),
                    " and input ", other, " is ",
                    type_name(types[other].value_or(Type::kReplicate)),
                    "; I mixes only with I (its gradient must be the same on every rank). ",
                    "Convert the I input with spmd::invariant_to_replicate(x, mesh, \"", dim(m),
                    "\"), whose backward all-reduces the gradient");
      return std::vector<Type>(returns, Type::kInvariant);
    }
    if (has(types, Type::kPartial)) return partial_outputs(m, types);
    return std::vector<Type>(returns,
                             has(types, Type::kVarying) ? Type::kVarying : Type::kReplicate);
  }

  // A pending sum passes only through an op linear in it, with Replicate
  // (or untyped) partners: the registry's rows say which.
  std::vector<Type> partial_outputs(int64_t m,
                                    const std::vector<std::optional<Type>>& types) const {
    const size_t pending = first(types, Type::kPartial);
    DTENSOR_CHECK(!has(types, Type::kVarying), where(m, types), ": input ", pending, " is ",
                  type_name(Type::kPartial), ", a pending sum, and input ",
                  first(types, Type::kVarying), " is ", type_name(Type::kVarying),
                  "; a pending sum mixes only with pending sums (adding) and Replicate values ",
                  "(scaling). ", reduce_first(m));
    const std::optional<std::vector<Type>> linear = linear_outputs(m, types);
    DTENSOR_CHECK(linear.has_value(), where(m, types), ": input ", pending, " is ",
                  type_name(Type::kPartial), ", a pending sum, and no sharding rule of ", name_,
                  " keeps it pending with these inputs: the op is not linear ", "in it. ",
                  reduce_first(m));
    return *linear;
  }

  // The outputs' types from a strategy row that keeps every input as it is
  // (P where the input is P on m, R elsewhere) on mesh dim m; nullopt when
  // no strategy has one.
  std::optional<std::vector<Type>> linear_outputs(
      int64_t m, const std::vector<std::optional<Type>>& types) const {
    const auto strategies = dtensor::strategies().find(name_);
    if (strategies == nullptr) return std::nullopt;
    std::vector<TensorInput> inputs;
    size_t i = 0;
    for_each_tensor_argument(arguments_, [&](const at::Tensor&, size_t a, int64_t list_index) {
      std::vector<PlacementPtr> placements(table_.mesh().ndim(), Replicate::make());
      if (types[i] == Type::kPartial) placements[m] = Partial::make();
      inputs.push_back(
          TensorInput{a, list_index,
                      std::make_shared<const DTensorSpec>(table_.mesh(), std::move(placements),
                                                          shapes_[i], dtypes_[i]),
                      true});
      ++i;
    });
    const OpCall call(op_, arguments_, std::move(inputs), table_.mesh());
    for (const Strategy& strategy : *strategies) {
      std::vector<ShardingRow> rows;
      try {
        rows = strategy.rows(call, m);
      } catch (const Error&) {
        continue;  // a rule that does not fit local shapes offers nothing
      }
      for (const ShardingRow& row : rows) {
        if (keeps_inputs(call, row, m)) return row_output_types(row);
      }
    }
    return std::nullopt;
  }

  static bool keeps_inputs(const OpCall& call, const ShardingRow& row, int64_t m) {
    for (size_t i = 0; i < call.num_inputs(); ++i) {
      if (row.inputs[i] != nullptr && *row.inputs[i] != *call.placement(i, m)) return false;
    }
    return true;
  }

  static std::vector<Type> row_output_types(const ShardingRow& row) {
    std::vector<Type> out;
    for (const PlacementPtr& p : row.outputs) {
      out.push_back(p != nullptr && p->is_partial() ? Type::kPartial : Type::kReplicate);
    }
    return out;
  }

  const std::string& dim(int64_t m) const { return table_.mesh().dim_names()[m]; }

  std::string where(int64_t m, const std::vector<std::optional<Type>>& types) const {
    std::vector<std::string> letters;
    for (const auto& type : types) letters.push_back(type ? type_letter(*type) : "untyped");
    return absl::StrCat(name_, " over mesh dim \"", dim(m),
                        "\" (input types: ", absl::StrJoin(letters, ", "), ")");
  }

  std::string reduce_first(int64_t m) const {
    return absl::StrCat("Reduce it first: spmd::all_reduce(x, mesh, \"", dim(m),
                        "\", ReplicatedType::kReplicate), or spmd::reduce_scatter");
  }

  const c10::OperatorHandle& op_;
  const std::string name_;
  c10::ArrayRef<c10::IValue> arguments_;
  const TypeTable& table_;
  std::vector<const Types*> inputs_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<c10::ScalarType> dtypes_;
  bool typed_ = false;
};

// Types every tensor `returned` holds (a Tensor[] return: each element).
void type_outputs(TypeTable& table, c10::ArrayRef<c10::IValue> returned,
                  const std::vector<Types>& types) {
  for (size_t j = 0; j < returned.size() && j < types.size(); ++j) {
    if (returned[j].isTensor()) {
      table.set(returned[j].toTensor(), types[j]);
    } else if (returned[j].isTensorList()) {
      for (const at::Tensor& t : returned[j].toTensorList().vec()) table.set(t, types[j]);
    }
  }
}

// The return of `op` that aliases argument `a` and writes it, if any.
std::optional<size_t> written_return(const c10::OperatorHandle& op, size_t a) {
  for (size_t j = 0; j < op.schema().returns().size(); ++j) {
    if (argument_written_by_return(op.schema(), j) == static_cast<int64_t>(a)) return j;
  }
  return std::nullopt;
}

// How the typed tensors sharing memory with what `op` writes are retyped
// (TypeTable::retype_after_write); throws before anything is written when
// one cannot take the written types.
std::vector<TypeTable::Retype> retypes_of_writes(const c10::OperatorHandle& op,
                                                 const std::string& name,
                                                 c10::ArrayRef<c10::IValue> arguments,
                                                 const std::vector<Types>& types,
                                                 const TypeTable& table) {
  std::vector<TypeTable::Retype> retypes;
  for (size_t a = 0; a < arguments.size(); ++a) {
    const std::optional<size_t> j = written_return(op, a);
    if (!j.has_value() || !arguments[a].isTensor() || !arguments[a].toTensor().defined()) continue;
    std::vector<TypeTable::Retype> more =
        table.retype_after_write(name, arguments[a].toTensor(), types[*j]);
    retypes.insert(retypes.end(), more.begin(), more.end());
  }
  return retypes;
}

// The dispatch below the type-check key. An op with no other backend (one
// whose arguments hold no tensor) runs on the CPU, as it would outside a scope.
c10::DispatchKeySet below(c10::DispatchKeySet keys) {
  const c10::DispatchKeySet rest = keys.remove_backend(c10::BackendComponent::PrivateUse2Bit);
  return rest.highestBackendKey() == c10::BackendComponent::InvalidBit
             ? rest | c10::DispatchKeySet(c10::BackendComponent::CPUBit)
             : rest;
}

void type_check_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                       torch::jit::Stack* stack) {
  TypeTable* table = current_type_table();
  if (table == nullptr || !table->checking()) {
    op.redispatchBoxed(below(keys), stack);
    return;
  }
  // A `_foreach_*` op (an optimizer's list math) mixes nothing across its
  // lists' elements, which may have different types (R weights beside I
  // ones): it runs as its per-element ops (rules/decomposition.h), each
  // checked and typed, the in-place ones retyping what they write.
  const std::string name = op_name_string(op.operator_name());
  if (const auto per_element = decompositions().find(name)) {
    per_element->front()(op, *stack);
    return;
  }
  const size_t num_arguments = op.schema().arguments().size();
  std::optional<std::vector<Types>> types;
  std::vector<TypeTable::Retype> retypes;
  {
    // The checker's own ops (a strategy's), and those the op runs inside,
    // are not the user's: they pass through.
    const TypeTable::Pause pause(*table);
    const c10::ArrayRef<c10::IValue> arguments(&*(stack->end() - num_arguments), num_arguments);
    const OpTyping typing(op, name, arguments, *table);
    if (typing.typed()) {
      types = typing.output_types();
      retypes = retypes_of_writes(op, name, arguments, *types, *table);
    }
    op.redispatchBoxed(below(keys), stack);
  }
  const size_t returns = op.schema().returns().size();
  if (types && returns > 0) {
    type_outputs(*table, c10::ArrayRef<c10::IValue>(&*(stack->end() - returns), returns), *types);
  }
  table->apply(retypes);
}

const bool registered = [] {
  register_kernel_for_every_aten_op(kTypeCheckKey,
                                    torch::CppFunction::makeFromBoxedFunction<&type_check_kernel>);
  return true;
}();

TORCH_LIBRARY_IMPL(_, PrivateUse2, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&type_check_kernel>());
}

// Sparse and quantized tensors inside a scope reach the type-check key's
// sparse and quantized kinds: they pass unchecked to their own kernels.
void pass_through(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                  torch::jit::Stack* stack) {
  op.redispatchBoxed(below(keys), stack);
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse2, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&pass_through>());
}

TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse2, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&pass_through>());
}

static_assert(kTypeCheckKey == c10::DispatchKey::PrivateUse2,
              "the fallback above names the type-check key");

}  // namespace
}  // namespace dtensor::spmd
