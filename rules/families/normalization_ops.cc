// Copyright 2026 The dtensor Authors.
//
// rules/families/normalization_ops.cc: softmax, log_softmax and layer_norm
// with their backward formulas. The normalized dims must be whole on every
// rank; every other dim passes any split through.
#include <numeric>

#include "placements/partial.h"
#include "placements/replicate.h"
#include "placements/shard.h"
#include "rules/pointwise.h"
#include "rules/registration.h"
#include "rules/roles.h"

namespace dtensor {
namespace {

// Softmax-like ops: argument `dim_argument` names the normalized dim.
OpRule softmax_rule(size_t dim_argument) {
  return pointwise_rule(Linearity::kNone, [dim_argument](const OpCall& call) {
    const int64_t ndim = call.input(0).spec->ndim();
    return std::vector<int64_t>{
        normalize_tensor_dim(call.argument(dim_argument).toInt(), std::max<int64_t>(ndim, 1),
                             call.op_name())};
  });
}

// Layer norm over the trailing `normalized_shape` dims: a split of a leading
// dim of the input passes to the outputs that have it (the normalized output
// and the per-row statistics); weight and bias stay Replicate, and their
// gradients are Partial(sum) over the split rows.
struct LayerNorm {
  bool backward;
  size_t input;                // OpCall input holding the activation
  size_t normalized_argument;  // argument holding normalized_shape
};

int64_t leading_dims(const OpCall& call, size_t normalized_argument, size_t input) {
  return call.input(input).spec->ndim() -
         static_cast<int64_t>(call.argument(normalized_argument).toIntVector().size());
}

std::vector<ShardingRow> layer_norm_rows(const OpCall& call, int64_t m, const LayerNorm& ln) {
  const PlacementPtr& p = call.placement(ln.input, m);
  const auto dim = split_dim_of(*p);
  std::vector<ShardingRow> rows;
  if (!dim || *dim >= leading_dims(call, ln.normalized_argument, ln.input) ||
      !p->fills_role(RuleRole::kPassThrough)) {
    return rows;
  }
  ShardingRow row;
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    const DTensorSpec& spec = *call.input(i).spec;
    // Activations, gradients and statistics share the leading dims.
    const bool per_row = spec.ndim() == call.input(ln.input).spec->ndim();
    row.inputs.push_back(per_row ? p : Replicate::make());
  }
  if (ln.backward) {
    row.outputs = {p, Partial::make(ReduceOp::kSum), Partial::make(ReduceOp::kSum)};
  } else {
    row.outputs = {p, p, p};
  }
  rows.push_back(std::move(row));
  return rows;
}

std::vector<std::vector<int64_t>> layer_norm_shapes(const OpCall& call) {
  const std::vector<int64_t>& shape = call.input(0).spec->shape();
  const int64_t lead = leading_dims(call, 1, 0);
  std::vector<int64_t> stats(shape.begin(), shape.begin() + lead);
  stats.resize(shape.size(), 1);
  return {shape, stats, stats};
}

std::vector<std::vector<int64_t>> layer_norm_backward_shapes(const OpCall& call) {
  // grad_out, input, normalized_shape, mean, rstd, weight?, bias?, mask
  const std::vector<int64_t> normalized = call.argument(2).toIntVector();
  return {call.input(1).spec->shape(), normalized, normalized};
}

}  // namespace

DTENSOR_REGISTER_RULES(normalization) {
  add_to_existing(registry, {"aten::_softmax", "aten::_log_softmax"}, softmax_rule(1));
  add_to_existing(registry,
                  {"aten::_softmax_backward_data", "aten::_log_softmax_backward_data"},
                  softmax_rule(2));
  OpRule forward;
  forward.strategy = [](const OpCall& call, int64_t m) {
    return layer_norm_rows(call, m, LayerNorm{false, 0, 1});
  };
  forward.output_shapes = layer_norm_shapes;
  add_to_existing(registry, {"aten::native_layer_norm"}, forward);
  OpRule backward;
  backward.strategy = [](const OpCall& call, int64_t m) {
    return layer_norm_rows(call, m, LayerNorm{true, 1, 2});
  };
  backward.output_shapes = layer_norm_backward_shapes;
  add_to_existing(registry, {"aten::native_layer_norm_backward"}, backward);
}

}  // namespace dtensor
