// Copyright 2026 The dtensor Authors.
//
// dtensor/tools/schema_samples.cc: a sample call for every op with a rule,
// made from its schema alone where builtin_samples() has none.
//
// Each argument gets a short list of candidate values chosen by its type and
// name (a `dim` is 1 or 0, a `size` is [30], [6, 5] or [5, 6], a tensor is
// [5, 6], [6] or 0-dim, an optional is first left out), and the first
// combination the op accepts on plain CPU tensors is the sample. An `out=`
// tensor is then replaced by zeros of the shape the op gave it, so that rows
// can lay it out. Ops that no combination runs are reported as unsampled,
// and the verifier's test requires there be none: such an op needs a
// written sample in builtin_samples.cc.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <set>

#include <dtensor/base/compat.h>
#include <dtensor/base/op_name.h>
#include <dtensor/rules/decomposition.h>
#include <dtensor/rules/strategy.h>
#include <dtensor/rules/tensor_arguments.h>
#include <dtensor/tools/rule_verifier.h>
#include <dtensor/tools/sample_values.h>

namespace dtensor {
namespace {

using sample_values::index_pattern;
using sample_values::nonzero;
using sample_values::values;
using Candidates = std::vector<c10::IValue>;

// More combinations than this per op are not worth trying: the lists below
// are short, and an op none of the first ones runs needs a written sample.
constexpr size_t kMaxAttempts = 256;

bool is_out_argument(const c10::Argument& argument) {
  return argument.kwarg_only() && argument.alias_info() != nullptr &&
         argument.alias_info()->isWrite();
}

// A matrix, a row to broadcast, a 0-dim value. The first tensor holds zeros
// (relu, sign and abs meet them); later ones never do, since they may be
// divisors.
Candidates tensor_candidates(const std::string& name, int64_t seed) {
  if (name == "condition" || name == "mask") return {values({5, 6}, seed).gt(0)};
  if (name == "index" || name == "indices") return {index_pattern(5, 6, 1, 5)};
  if (name == "scalars") return {nonzero({2}, seed)};  // one per tensor of a list
  if (seed == 0) return {values({5, 6}), values({6}), values({})};
  return {nonzero({5, 6}, seed), nonzero({6}, seed), nonzero({}, seed)};
}

Candidates int_candidates(const std::string& name) {
  if (name == "dim" || name == "dim1") return {int64_t{1}, int64_t{0}};
  if (name == "dim0") return {int64_t{0}};
  if (name == "start") return {int64_t{1}};
  if (name == "end") return {int64_t{4}};
  if (name == "length" || name == "index") return {int64_t{3}};
  if (name == "chunks" || name == "split_size" || name == "sections") return {int64_t{2}};
  return {int64_t{1}, int64_t{2}, int64_t{0}};
}

Candidates int_list_candidates(const std::string& name) {
  using Ints = std::vector<int64_t>;
  if (name == "dim" || name == "dims") return {Ints{1}, Ints{1, 0}, Ints{0, 1}};
  if (name == "size" || name == "shape") return {Ints{30}, Ints{6, 5}, Ints{5, 6}};
  if (name == "sizes") return {Ints{2, 3}};
  if (name == "split_sizes") return {Ints{2, 4}, Ints{2, 3}};
  if (name == "normalized_shape") return {Ints{6}};
  if (name == "repeats") return {Ints{2, 1}};
  return {Ints{1}, Ints{5, 6}};
}

Candidates tensor_list_candidates(int64_t seed) {
  return {c10::List<at::Tensor>({nonzero({5, 6}, seed), nonzero({5, 6}, seed + 1)})};
}

// Candidates of a non-optional type; empty when the type is not handled.
Candidates plain_candidates(const c10::TypePtr& type, const c10::Argument& argument, int64_t seed) {
  const std::string& name = argument.name();
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
      return is_out_argument(argument) ? Candidates{at::empty({0})} : tensor_candidates(name, seed);
    case c10::TypeKind::NumberType:
      return {c10::Scalar(2)};
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      return int_candidates(name);
    case c10::TypeKind::FloatType:
      return {0.5};
    case c10::TypeKind::BoolType:
      return name == "train" ? Candidates{true} : Candidates{false, true};
    case c10::TypeKind::StringType:  // a mode: gelu's approximate, scatter's reductions
      return {std::string("none"), std::string("sum"), std::string("add")};
    case c10::TypeKind::ListType: {
      const c10::TypePtr element = type->containedType(0);
      if (element->kind() == c10::TypeKind::TensorType) return tensor_list_candidates(seed);
      if (element->kind() == c10::TypeKind::IntType ||
          element->kind() == c10::TypeKind::SymIntType) {
        return int_list_candidates(name);
      }
      if (element->kind() == c10::TypeKind::NumberType) {  // one per tensor of a list
        return {c10::IValue(std::vector<c10::Scalar>{c10::Scalar(2), c10::Scalar(3)})};
      }
      return {};
    }
    default:
      return {};
  }
}

// The schema's default first, then None for an optional, then the type's.
Candidates argument_candidates(const c10::Argument& argument, int64_t seed) {
  Candidates out;
  if (argument.default_value().has_value()) out.push_back(*argument.default_value());
  c10::TypePtr type = argument.type();
  if (type->kind() == c10::TypeKind::OptionalType) {
    if (out.empty()) out.push_back(c10::IValue());
    // Dtypes, layouts, devices, memory formats and generators have no
    // candidates of their own: they stay left out.
    type = type->containedType(0);
  }
  for (c10::IValue& value : plain_candidates(type, argument, seed)) out.push_back(std::move(value));
  return out;
}

// Whether the op runs on `arguments`; on success, out= tensors become zeros
// of the shape the op gave them.
bool runs(const c10::OperatorHandle& op, std::vector<c10::IValue>& arguments) {
  // Cloned: in-place ops write into their arguments.
  std::vector<c10::IValue> stack =
      map_tensor_arguments(arguments, [](const at::Tensor& t) { return t.clone(); });
  const std::vector<c10::IValue> passed = stack;
  try {
    op.callBoxed(stack);
  } catch (const std::exception&) {
    return false;
  }
  const std::vector<c10::Argument>& schema_arguments = op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (is_out_argument(schema_arguments[i])) {
      arguments[i] = map_tensor_arguments({passed[i]},
                                          [](const at::Tensor& t) { return at::zeros_like(t); })[0];
    }
  }
  return true;
}

// The first combination of `candidates` the op runs, in the order of the
// lists (earlier candidates of later arguments vary fastest).
c10::optional<std::vector<c10::IValue>> first_that_runs(const c10::OperatorHandle& op,
                                                        const std::vector<Candidates>& candidates) {
  std::vector<size_t> choice(candidates.size(), 0);
  for (size_t attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::vector<c10::IValue> arguments;
    for (size_t i = 0; i < candidates.size(); ++i) arguments.push_back(candidates[i][choice[i]]);
    if (runs(op, arguments)) return arguments;
    size_t i = candidates.size();
    while (i > 0 && ++choice[i - 1] == candidates[i - 1].size()) choice[--i] = 0;
    if (i == 0) return c10::nullopt;
  }
  return c10::nullopt;
}

c10::optional<SampleCall> schema_sample(const std::string& op_name, const c10::OperatorHandle& op) {
  std::vector<Candidates> candidates;
  int64_t seed = 0;
  for (const c10::Argument& argument : op.schema().arguments()) {
    candidates.push_back(argument_candidates(argument, seed));
    if (candidates.back().empty()) return c10::nullopt;
    seed += 2;
  }
  // Most combinations tried are wrong on purpose; their warnings are noise.
  const SilencedWarnings silenced;
  c10::optional<std::vector<c10::IValue>> arguments = first_that_runs(op, candidates);
  if (!arguments) return c10::nullopt;
  return SampleCall{op_name, std::move(*arguments)};
}

}  // namespace

c10::optional<c10::OperatorHandle> find_operator(const std::string& op_name) {
  return c10::Dispatcher::singleton().findOp(parse_op_name(op_name));
}

bool runs_on_cpu(const std::string& op_name) {
  const c10::optional<c10::OperatorHandle> op = find_operator(op_name);
  if (!op || !op->hasSchema()) return false;
  for (c10::DispatchKey key : {c10::DispatchKey::CPU, c10::DispatchKey::CompositeExplicitAutograd,
                               c10::DispatchKey::CompositeExplicitAutogradNonFunctional,
                               c10::DispatchKey::CompositeImplicitAutograd}) {
    if (op->hasKernelForDispatchKey(key)) return true;
  }
  return false;
}

std::vector<SampleCall> all_samples(std::vector<std::string>* unsampled) {
  std::vector<SampleCall> samples = builtin_samples();
  std::set<std::string> sampled;
  for (const SampleCall& sample : samples) sampled.insert(sample.op_name);
  std::set<std::string> with_rules;
  for (const std::string& op_name : strategies().keys()) with_rules.insert(op_name);
  for (const std::string& op_name : decompositions().keys()) with_rules.insert(op_name);
  for (const std::string& op_name : with_rules) {
    if (sampled.count(op_name) != 0) continue;
    if (!runs_on_cpu(op_name)) continue;  // another libtorch's op, or a GPU-only one
    c10::optional<SampleCall> sample = schema_sample(op_name, *find_operator(op_name));
    if (sample) {
      samples.push_back(std::move(*sample));
    } else if (unsampled != nullptr) {
      unsampled->push_back(op_name);
    }
  }
  return samples;
}

}  // namespace dtensor
