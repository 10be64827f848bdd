// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/propagation.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <numeric>

#include <dtensor/base/check.h>
#include <dtensor/base/op_name.h>
#include <dtensor/placements/layout.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/rules/cost.h>
#include <dtensor/rules/roles.h>
#include <dtensor/rules/tensor_arguments.h>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

// A row of one mesh dim and what moving the inputs to it costs, with the
// reduction it defers (Engine::deferred_reduction_cost).
struct CandidateRow {
  ShardingRow row;
  double cost = 0;
};

int64_t global_bytes(const DTensorSpec& spec) {
  return spec.numel() * static_cast<int64_t>(c10::elementSize(spec.dtype()));
}

std::vector<ReturnLayout> return_layouts(const OpCall& call, size_t num_outputs,
                                         const std::vector<size_t>& list_sizes) {
  const auto& returns = call.schema().returns();
  std::vector<ReturnLayout> out(returns.size());
  size_t next = 0, next_list = 0;
  for (size_t j = 0; j < returns.size(); ++j) {
    const c10::TypePtr& type = returns[j].type();
    ReturnLayout& layout = out[j];
    layout.first_output = next;
    if (type->kind() == c10::TypeKind::TensorType) {
      layout.kind = ReturnLayout::Kind::kTensor;
      layout.count = 1;
    } else if (type->isSubtypeOf(*c10::ListType::ofTensors())) {
      layout.kind = ReturnLayout::Kind::kTensorList;
      layout.count = list_sizes.at(next_list++);
    }
    next += layout.count;
    layout.writes_argument = argument_written_by_return(call.schema(), j);
  }
  DTENSOR_CHECK(next == num_outputs, call.op_name(), ": expected ", next,
                " output tensors from the schema, found ", num_outputs, " shapes");
  return out;
}

// Shapes and list lengths of the tensors in `outputs` (the returns of a meta run).
void collect_tensors(const c10::IValue& value, std::vector<std::vector<int64_t>>& shapes,
                     std::vector<size_t>& list_sizes) {
  if (value.isTensor()) {
    shapes.push_back(value.toTensor().sizes().vec());
  } else if (value.isTensorList()) {
    const auto list = value.toTensorList();
    list_sizes.push_back(list.size());
    // By index: a c10::List's elements are proxies, not references.
    for (size_t i = 0; i < list.size(); ++i) shapes.push_back(list.get(i).sizes().vec());
  }
}

std::pair<std::vector<std::vector<int64_t>>, std::vector<size_t>> run_on_meta(const OpCall& call) {
  size_t input = 0;
  torch::jit::Stack stack = map_tensor_arguments(call.arguments(), [&](const at::Tensor&) {
    const DTensorSpec& spec = *call.input(input++).spec;
    return at::empty(spec.shape(), at::TensorOptions().dtype(spec.dtype()).device(at::kMeta));
  });
  try {
    call.op().callBoxed(stack);
  } catch (const c10::Error& error) {
    DTENSOR_CHECK(false, call.op_name(), ": cannot infer the output shapes: running it on meta ",
                  "tensors failed (", error.what_without_backtrace(),
                  ") and its strategies give no output_shapes");
  }
  std::vector<std::vector<int64_t>> shapes;
  std::vector<size_t> list_sizes;
  for (const c10::IValue& value : stack) collect_tensors(value, shapes, list_sizes);
  return {shapes, list_sizes};
}

struct Choice {
  std::vector<const CandidateRow*> rows;  // one per mesh dim
};

// `shape` with its kernel-sized tail (kSizedByKernel) replaced by the dims
// of `local` from there on.
std::vector<int64_t> sized_by_kernel(const std::vector<int64_t>& shape, c10::IntArrayRef local,
                                     size_t k) {
  const size_t leading = shape.size() - 1;
  DTENSOR_CHECK(local.size() >= leading, "output ", k, ": expected a local result of rank ",
                leading, " or more (shape [", absl::StrJoin(shape, ", "),
                "], -1: sized by the kernel), found shape [", absl::StrJoin(local, ", "),
                "] (a wrong sharding rule?)");
  std::vector<int64_t> sized(shape.begin(), shape.end() - 1);
  sized.insert(sized.end(), local.begin() + static_cast<std::ptrdiff_t>(leading), local.end());
  return sized;
}

class Engine {
 public:
  Engine(const OpCall& call, const PropagationOptions& options)
      : call_(call),
        options_(options),
        name_(call.op_name()),
        strategies_(strategies().find(name_)),
        costs_(call.mesh().collective_costs()) {}

  // Only the given rows, one per mesh dim.
  std::unique_ptr<Propagation> run_rows(const std::vector<ShardingRow>& rows) {
    DTENSOR_CHECK(static_cast<int64_t>(rows.size()) == call_.mesh().ndim(), name_,
                  ": expected one row per mesh dim (", call_.mesh().ndim(), "), found ",
                  rows.size());
    infer_outputs();
    rows_.resize(rows.size());
    Choice choice;
    for (size_t m = 0; m < rows.size(); ++m) {
      add_row(m, rows[m]);
      if (rows_[m].empty()) return nullptr;  // it would relayout a tensor written in place
      choice.rows.push_back(&rows_[m].back());
    }
    std::string error;
    std::unique_ptr<Propagation> result = try_choice(choice, error);
    DTENSOR_CHECK(result != nullptr || error.empty(), name_,
                  ": the rows do not fit the call: ", error);
    return result;
  }

  std::unique_ptr<Propagation> run() {
    if (auto decomposition = decompositions().find(name_)) {
      auto result = std::make_unique<Propagation>();
      result->decomposition = decomposition->front();
      return result;
    }
    DTENSOR_CHECK(strategies_ != nullptr || options_.replicate_fallback, "no sharding rule for ",
                  name_, " with inputs ", call_.describe_inputs(),
                  "; register a strategy with dtensor::strategies().add(\"", name_,
                  "\", strategy), or opt into dtensor::ScopedReplicateFallback");
    infer_outputs();
    collect_rows();
    std::unique_ptr<Propagation> result = choose();
    result->replicate_fallback = strategies_ == nullptr;
    return result;
  }

 private:
  // Output shapes as the op's own calls infer them, unless a strategy says.
  void infer_outputs() {
    OutputShapesFn from_strategy;
    if (strategies_ != nullptr) {
      for (const Strategy& strategy : *strategies_) {
        if (strategy.output_shapes) from_strategy = strategy.output_shapes;
      }
    }
    std::vector<size_t> list_sizes;
    if (from_strategy) {
      shapes_ = from_strategy(call_);
      for (const auto& ret : call_.schema().returns()) {
        if (ret.type()->isSubtypeOf(*c10::ListType::ofTensors())) {
          list_sizes.push_back(shapes_.size());
        }
      }
    } else {
      std::tie(shapes_, list_sizes) = run_on_meta(call_);
    }
    returns_ = return_layouts(call_, shapes_.size(), list_sizes);
  }

  void collect_rows() {
    const int64_t ndim = call_.mesh().ndim();
    rows_.resize(ndim);
    for (int64_t m = 0; m < ndim; ++m) {
      if (strategies_ != nullptr) {
        for (const Strategy& strategy : *strategies_) {
          for (ShardingRow& row : strategy.rows(call_, m)) add_row(m, std::move(row));
        }
      }
      // Running on whole inputs is always right for the op's own kernel (and
      // its local kernel, which runs for every layout).
      add_row(m, replicate_row(call_));
      std::stable_sort(
          rows_[m].begin(), rows_[m].end(),
          [](const CandidateRow& a, const CandidateRow& b) { return a.cost < b.cost; });
    }
  }

  // Whether the op gives the tensor it writes in place the output's layout
  // (in-place views: t_, unsqueeze_).
  bool updates_layout_in_place() const {
    return strategies_ != nullptr &&
           std::any_of(strategies_->begin(), strategies_->end(),
                       [](const Strategy& strategy) { return strategy.updates_layout_in_place; });
  }

  // Whether `candidates` hold `row` already (rows as `add_row` keeps them:
  // every input placement set). Strategies may give a row twice (a binary
  // op split alike from either operand); a second copy would only double
  // the combinations tried.
  static bool offers(const std::vector<CandidateRow>& candidates, const ShardingRow& row) {
    // Outputs may be null (a rule that leaves one unset).
    const auto same = [](const std::vector<PlacementPtr>& a, const std::vector<PlacementPtr>& b) {
      return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                        [](const PlacementPtr& x, const PlacementPtr& y) {
                          return x == y || (x != nullptr && y != nullptr && *x == *y);
                        });
    };
    return std::any_of(candidates.begin(), candidates.end(), [&](const CandidateRow& c) {
      return same(c.row.inputs, row.inputs) && same(c.row.outputs, row.outputs) &&
             c.row.assumes_inputs_kept_on == row.assumes_inputs_kept_on;
    });
  }

  void add_row(int64_t m, ShardingRow row) {
    DTENSOR_CHECK(row.inputs.size() == call_.num_inputs() &&
                      row.outputs.size() == call_.schema().returns().size(),
                  name_, ": a strategy row must give ", call_.num_inputs(), " input and ",
                  call_.schema().returns().size(), " output placements, found ", row.inputs.size(),
                  " and ", row.outputs.size());
    for (int64_t kept : row.assumes_inputs_kept_on) {
      DTENSOR_CHECK(kept >= 0 && kept < call_.mesh().ndim() && kept != m, name_,
                    ": a row of mesh dim ", m, " assumes mesh dim ", kept,
                    " kept; expected another mesh dim of the ", call_.mesh().ndim());
    }
    check_kernel_sized_dims_kept(row);
    if (!updates_layout_in_place() && !keeps_written_arguments(m, row)) return;
    CandidateRow candidate{std::move(row), 0};
    for (size_t i = 0; i < call_.num_inputs(); ++i) {
      const DTensorSpec& spec = *call_.input(i).spec;
      if (candidate.row.inputs[i] == nullptr) {
        candidate.row.inputs[i] = spec.placements()[m];  // the rule ignores this input
        continue;
      }
      candidate.cost += placement_change_cost(*spec.placements()[m], *candidate.row.inputs[i],
                                              global_bytes(spec), call_.mesh().size(m), costs_);
    }
    if (offers(rows_[m], candidate.row)) return;
    candidate.cost += deferred_reduction_cost(m, candidate.row);
    rows_[m].push_back(std::move(candidate));
  }

  // A row that keeps a pending sum pending (an input that is Partial on mesh
  // dim m stays Partial into a Partial output) while it gathers another input
  // only defers the sum's reduction, so it is priced with the all-reduce of
  // the outputs it leaves pending. Without that, a gradient that is a pending
  // sum meeting a row-split weight gathers the weight and stays pending (cheap
  // now), then costs a gather and a reduce-scatter further on, where a
  // hand-written plan reduces it once. A row that keeps a sum pending with
  // nothing else to gather (a linear op, a norm's backward) is not priced:
  // its sibling terms are pending too, and they are reduced once, together,
  // where they meet. Nor is a Partial a row makes from unreduced inputs (a
  // contraction over a split dim): producing it is what such a row is for.
  double deferred_reduction_cost(int64_t m, const ShardingRow& row) const {
    const DTensorSpec* pending = nullptr;
    bool gathers = false;
    for (size_t i = 0; i < call_.num_inputs(); ++i) {
      const Placement& current = *call_.input(i).spec->placements()[m];
      if (current.is_partial() && row.inputs[i]->is_partial()) {
        pending = call_.input(i).spec.get();
      } else if (!current.is_replicate() && current != *row.inputs[i]) {
        gathers = true;
      }
    }
    if (pending == nullptr || !gathers) return 0;
    const int64_t element_bytes = static_cast<int64_t>(c10::elementSize(pending->dtype()));
    double cost = 0;
    for (size_t j = 0; j < returns_.size(); ++j) {
      if (row.outputs[j] == nullptr || !row.outputs[j]->is_partial()) continue;
      const ReturnLayout& ret = returns_[j];
      for (size_t k = ret.first_output; k < ret.first_output + ret.count; ++k) {
        const int64_t numel =
            std::accumulate(shapes_[k].begin(), shapes_[k].end(), int64_t{1}, std::multiplies<>());
        cost += placement_change_cost(*row.outputs[j], *Replicate::make(), numel * element_bytes,
                                      call_.mesh().size(m), costs_);
      }
    }
    return cost;
  }

  // In-place and out= ops write into existing DTensors: their layouts stay,
  // and so does the layout of a return that aliases one.
  bool keeps_written_arguments(int64_t m, const ShardingRow& row) const {
    const auto& arguments = call_.schema().arguments();
    for (size_t i = 0; i < call_.num_inputs(); ++i) {
      const TensorInput& input = call_.input(i);
      const c10::AliasInfo* alias = arguments[input.argument].alias_info();
      if (alias == nullptr || !alias->isWrite()) continue;
      const PlacementPtr& current = input.spec->placements()[m];
      if (row.inputs[i] != nullptr && *row.inputs[i] != *current) return false;
    }
    for (size_t j = 0; j < returns_.size(); ++j) {
      const int64_t written = returns_[j].writes_argument;
      const TensorInput* input = written < 0 ? nullptr : call_.input_of_argument(written);
      if (input == nullptr) continue;
      const PlacementPtr& current = input->spec->placements()[m];
      if (row.outputs[j] == nullptr || *row.outputs[j] != *current) return false;
    }
    return true;
  }

  std::unique_ptr<Propagation> choose() {
    const int64_t ndim = call_.mesh().ndim();
    for (int64_t m = 0; m < ndim; ++m) {
      DTENSOR_CHECK(!rows_[m].empty(), name_, ": no strategy keeps the layout of the ",
                    "tensor written in place (inputs ", call_.describe_inputs(), ")");
    }
    // Costs add up over mesh dims, so the cheapest row per dim (each dim's
    // rows are sorted, cheapest first) is the cheapest combination, and the
    // first of the ranking below too; the rest are ranked and tried, cheapest
    // first, only if it does not fit.
    Choice cheapest;
    for (int64_t m = 0; m < ndim; ++m) cheapest.rows.push_back(&rows_[m].front());
    std::string last_error;
    if (auto result = try_choice(cheapest, last_error)) return result;
    std::vector<Choice> choices = ranked_choices();
    for (const Choice& choice : choices) {
      if (auto result = try_choice(choice, last_error)) return result;
    }
    DTENSOR_CHECK(false, name_, ": no strategy fits inputs ", call_.describe_inputs(),
                  last_error.empty() ? "" : " (last: ", last_error, last_error.empty() ? "" : ")");
    return nullptr;
  }

  std::vector<Choice> ranked_choices() const {
    const int64_t ndim = call_.mesh().ndim();
    std::vector<Choice> all(1);
    for (int64_t m = 0; m < ndim; ++m) {
      std::vector<Choice> next;
      for (const Choice& prefix : all) {
        for (const CandidateRow& row : rows_[m]) {
          Choice choice = prefix;
          choice.rows.push_back(&row);
          next.push_back(std::move(choice));
        }
        if (next.size() > kMaxChoices) break;
      }
      all = std::move(next);
    }
    std::stable_sort(all.begin(), all.end(), [](const Choice& a, const Choice& b) {
      return total_cost(a) < total_cost(b);
    });
    return all;
  }

  static double total_cost(const Choice& choice) {
    double cost = 0;
    for (const CandidateRow* row : choice.rows) cost += row->cost;
    return cost;
  }

  // Whether every mesh dim some row of `choice` assumes kept keeps each
  // input's current placement.
  bool keeps_assumed_inputs(const Choice& choice) const {
    for (const CandidateRow* row : choice.rows) {
      for (int64_t kept : row->row.assumes_inputs_kept_on) {
        const std::vector<PlacementPtr>& inputs = choice.rows[kept]->row.inputs;
        for (size_t i = 0; i < call_.num_inputs(); ++i) {
          if (!(*inputs[i] == *call_.placement(i, kept))) return false;
        }
      }
    }
    return true;
  }

  std::unique_ptr<Propagation> try_choice(const Choice& choice, std::string& error) const {
    if (!keeps_assumed_inputs(choice)) return nullptr;
    auto result = std::make_unique<Propagation>();
    try {
      for (size_t i = 0; i < call_.num_inputs(); ++i) {
        std::vector<PlacementPtr> placements;
        for (const CandidateRow* row : choice.rows) placements.push_back(row->row.inputs[i]);
        const DTensorSpecPtr& current = call_.input(i).spec;
        if (same_placements(placements, current->placements())) {
          result->input_targets.push_back(current);
          continue;
        }
        result->input_targets.push_back(
            std::make_shared<const DTensorSpec>(current->with_placements(placements)));
        result->redistributes = true;
      }
      for (const ReturnLayout& ret : returns_) {
        for (size_t k = 0; k < ret.count; ++k) {
          const size_t j = &ret - returns_.data();
          std::vector<PlacementPtr> placements;
          for (const CandidateRow* row : choice.rows) placements.push_back(row->row.outputs[j]);
          const auto& shape = shapes_[ret.first_output + k];
          result->output_placements.push_back(normalize_placements(
              placements, static_cast<int64_t>(shape.size()), call_.mesh().shape()));
        }
      }
    } catch (const Error& e) {
      error = e.what();
      return nullptr;
    }
    check_strict(*result);
    result->output_shapes = shapes_;
    result->returns = returns_;
    if (auto kernel = local_kernels().find(name_)) result->local_kernel = kernel->front();
    result->updates_layout_in_place = updates_layout_in_place();
    return result;
  }

  // Dims only the local kernel sizes cannot be split: their global length
  // would be unknown. A rule that splits one is wrong, not unfit: raised,
  // never passed over for another row.
  void check_kernel_sized_dims_kept(const ShardingRow& row) const {
    for (const ReturnLayout& ret : returns_) {
      const PlacementPtr& p = row.outputs[&ret - returns_.data()];
      for (size_t k = 0; k < ret.count && p != nullptr; ++k) {
        const std::vector<int64_t>& shape = shapes_[ret.first_output + k];
        if (!has_kernel_sized_dims(shape)) continue;
        const std::optional<int64_t> dim = p->split_dim();
        const bool kept =
            p->is_replicate() || p->is_partial() ||
            (dim.has_value() && *dim >= 0 && *dim < static_cast<int64_t>(shape.size()) - 1);
        DTENSOR_CHECK(kept, name_, ": output ", ret.first_output + k, " of shape [",
                      absl::StrJoin(shape, ", "),
                      "] (-1: the local kernel sizes that dim and any after it) is placed ",
                      p->to_string(), " by a row; expected Replicate, Partial or a split of one ",
                      "of its leading ", shape.size() - 1, " dims (a wrong sharding rule)");
      }
    }
  }

  void check_strict(const Propagation& result) const {
    if (!options_.strict || !result.redistributes) return;
    for (size_t i = 0; i < call_.num_inputs(); ++i) {
      const DTensorSpec& from = *call_.input(i).spec;
      const DTensorSpec& to = *result.input_targets[i];
      DTENSOR_CHECK(same_placements(from.placements(), to.placements()), "strict mode: ", name_,
                    " would redistribute input ", i, " from [",
                    placements_to_string(from.placements()), "] to [",
                    placements_to_string(to.placements()), "]");
    }
  }

  static constexpr size_t kMaxChoices = 4096;

  const OpCall& call_;
  const PropagationOptions& options_;
  const std::string name_;
  const std::shared_ptr<const std::vector<Strategy>> strategies_;
  const CollectiveCosts costs_;
  std::vector<std::vector<int64_t>> shapes_;
  std::vector<ReturnLayout> returns_;
  std::vector<std::vector<CandidateRow>> rows_;
};

}  // namespace

const DTensorSpecPtr& Propagation::output_spec(size_t k, c10::ScalarType dtype,
                                               const DeviceMesh& mesh,
                                               std::optional<c10::IntArrayRef> local_sizes) const {
  if (output_specs.size() != output_shapes.size()) output_specs.resize(output_shapes.size());
  DTensorSpecPtr& spec = output_specs[k];
  if (!has_kernel_sized_dims(output_shapes[k])) {
    if (spec == nullptr || spec->dtype() != dtype) {
      spec =
          std::make_shared<const DTensorSpec>(mesh, output_placements[k], output_shapes[k], dtype);
    }
    return spec;
  }
  DTENSOR_CHECK(local_sizes.has_value(), "output ", k,
                " is sized by its kernel: expected the local result's sizes");
  std::vector<int64_t> shape = sized_by_kernel(output_shapes[k], *local_sizes, k);
  if (spec == nullptr || spec->dtype() != dtype || spec->shape() != shape) {
    spec = std::make_shared<const DTensorSpec>(mesh, output_placements[k], std::move(shape), dtype);
  }
  return spec;
}

std::unique_ptr<Propagation> propagate(const OpCall& call, const PropagationOptions& options) {
  return Engine(call, options).run();
}

std::unique_ptr<Propagation> propagation_for_rows(const OpCall& call,
                                                  const std::vector<ShardingRow>& rows) {
  const PropagationOptions options;
  return Engine(call, options).run_rows(rows);
}

ShardingRow replicate_row(const OpCall& call) {
  ShardingRow row;
  row.inputs.assign(call.num_inputs(), Replicate::make());
  row.outputs.assign(call.schema().returns().size(), Replicate::make());
  return row;
}

}  // namespace dtensor
