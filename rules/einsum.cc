// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/einsum.h>

#include <string>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/rules/roles.h>
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_split.h"

namespace dtensor {
namespace {

struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

Equation parse_equation(std::string_view text) {
  const auto arrow = text.find("->");
  DTENSOR_CHECK(arrow != std::string_view::npos, "einsum rule \"", text,
                "\": expected \"inputs->output\", found no \"->\"");
  Equation eq;
  for (absl::string_view part : absl::StrSplit(absl::string_view(text.data(), arrow), ',')) {
    eq.inputs.emplace_back(part);
  }
  eq.output = std::string(text.substr(arrow + 2));
  for (const std::string& letters : eq.inputs) {
    for (char c : letters) {
      DTENSOR_CHECK(c >= 'a' && c <= 'z', "einsum rule \"", text,
                    "\": expected lowercase letters, found '", std::string(1, c), "'");
      DTENSOR_CHECK(letters.find(c) == letters.rfind(c), "einsum rule \"", text, "\": letter '",
                    std::string(1, c), "' repeats within one operand");
    }
  }
  for (char c : eq.output) {
    bool found = false;
    for (const std::string& letters : eq.inputs)
      found = found || letters.find(c) != std::string::npos;
    DTENSOR_CHECK(found, "einsum rule \"", text, "\": output letter '", std::string(1, c),
                  "' is in no input");
  }
  return eq;
}

class EinsumStrategy {
 public:
  EinsumStrategy(Equation eq, bool with_addend) : eq_(std::move(eq)), with_addend_(with_addend) {}

  std::vector<ShardingRow> rows(const OpCall& call, int64_t m) const {
    check_call(call);
    std::vector<ShardingRow> rows;
    for (size_t i = 0; i < eq_.inputs.size(); ++i) {
      const PlacementPtr& p = call.placement(i + offset(), m);
      const auto dim = split_dim_of(*p);
      if (!dim) continue;
      if (auto row = split_row(call, *p, eq_.inputs[i][*dim])) rows.push_back(std::move(*row));
    }
    for (size_t i = 0; i < eq_.inputs.size(); ++i) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        rows.push_back(partial_row(call, i, Partial::make(op)));
      }
    }
    return rows;
  }

  std::vector<std::vector<int64_t>> output_shapes(const OpCall& call) const {
    check_call(call);
    absl::flat_hash_map<char, int64_t> sizes;
    for (size_t i = 0; i < eq_.inputs.size(); ++i) {
      const std::vector<int64_t>& shape = call.input(i + offset()).spec->shape();
      for (size_t d = 0; d < shape.size(); ++d) sizes[eq_.inputs[i][d]] = shape[d];
    }
    std::vector<int64_t> out;
    for (char c : eq_.output) out.push_back(sizes[c]);
    return {out};
  }

 private:
  size_t offset() const { return with_addend_ ? 1 : 0; }

  void check_call(const OpCall& call) const {
    DTENSOR_CHECK(call.num_inputs() == eq_.inputs.size() + offset(), call.op_name(),
                  ": its einsum rule expects ", eq_.inputs.size() + offset(),
                  " tensor inputs, found ", call.num_inputs());
    for (size_t i = 0; i < eq_.inputs.size(); ++i) {
      DTENSOR_CHECK(
          call.input(i + offset()).spec->ndim() == static_cast<int64_t>(eq_.inputs[i].size()),
          call.op_name(), ": operand ", i, " of its einsum rule has dims \"", eq_.inputs[i],
          "\", found a ", call.input(i + offset()).spec->ndim(), "-D tensor");
    }
  }

  // Moves `split` to every operand's dim labelled `letter`.
  std::optional<ShardingRow> split_row(const OpCall& call, const Placement& split,
                                       char letter) const {
    const auto out_pos = eq_.output.find(letter);
    const bool kept = out_pos != std::string::npos;
    const RuleRole role = kept ? RuleRole::kPassThrough : RuleRole::kContraction;
    ShardingRow row;
    PlacementPtr out = kept ? move_for_role(split, role, out_pos, false)
                            : (split.fills_role(role) ? Partial::make(ReduceOp::kSum) : nullptr);
    if (out == nullptr) return std::nullopt;
    if (with_addend_) {
      row.inputs.push_back(addend_placement(call, out));
      if (row.inputs.back() == nullptr) return std::nullopt;
    }
    for (const std::string& letters : eq_.inputs) {
      const auto pos = letters.find(letter);
      if (pos == std::string::npos) {
        row.inputs.push_back(Replicate::make());
        continue;
      }
      PlacementPtr moved = move_for_role(split, role, pos, false);
      if (moved == nullptr) return std::nullopt;
      row.inputs.push_back(moved);
    }
    row.outputs = {out};
    return row;
  }

  ShardingRow partial_row(const OpCall& call, size_t which, const PlacementPtr& p) const {
    ShardingRow row;
    if (with_addend_) row.inputs.push_back(addend_placement(call, p));
    for (size_t i = 0; i < eq_.inputs.size(); ++i) {
      row.inputs.push_back(i == which ? p : Replicate::make());
    }
    row.outputs = {p};
    return row;
  }

  // The addend is broadcast against the output: it follows the output's
  // split where it has the dim, and is Replicate where it broadcasts;
  // nullptr when it holds the dim but cannot be split like the output.
  PlacementPtr addend_placement(const OpCall& call, const PlacementPtr& out) const {
    const auto out_dim = split_dim_of(*out);
    if (!out_dim) return out;  // Partial(sum) or Replicate alike
    const DTensorSpec& addend = *call.input(0).spec;
    const int64_t out_ndim = static_cast<int64_t>(eq_.output.size());
    const int64_t dim = *out_dim - (out_ndim - addend.ndim());
    const auto out_shape = output_shapes(call)[0];
    if (dim < 0 || (addend.shape()[dim] == 1 && out_shape[*out_dim] != 1)) {
      return Replicate::make();
    }
    // nullptr: the addend holds the dim but cannot be split like the output.
    return move_for_role(*out, RuleRole::kPassThrough, dim, addend.ndim() == out_ndim);
  }

  Equation eq_;
  bool with_addend_;
};

}  // namespace

Strategy einsum_strategy(std::string_view equation, bool with_addend) {
  auto einsum = std::make_shared<const EinsumStrategy>(parse_equation(equation), with_addend);
  Strategy strategy;
  strategy.rows = [einsum](const OpCall& call, int64_t m) { return einsum->rows(call, m); };
  strategy.output_shapes = [einsum](const OpCall& call) { return einsum->output_shapes(call); };
  return strategy;
}

}  // namespace dtensor
