// Copyright 2026 The dtensor Authors.
//
// rules/families/normalization_ops.cc: layer_norm and the fused rms_norm
// (libtorch 2.9+ runs rms_norm through it on some devices) with their
// backward formulas. The normalized dims must be whole on every rank; every
// other dim passes any split through. Softmax, whose normalized dim may be
// split, is in dtensor/dispatch/kernels/softmax_ops.cc.
#include <numeric>

#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/rules/registration.h>
#include <dtensor/rules/roles.h>
#include <dtensor/rules/strategy.h>

namespace dtensor {
namespace {

// Layer norm over the trailing `normalized_shape` dims: a split of a leading
// dim of the input passes to the outputs that have it (the normalized output
// and the per-row statistics); weight and bias stay Replicate, and their
// gradients are Partial(sum) over the split rows.
// The fused rms_norm is the same with no mean and no bias: two outputs
// (normalized, rstd) forward, two (input grad, weight grad) backward.
struct LayerNorm {
  bool backward;
  size_t input;                // OpCall input holding the activation
  size_t normalized_argument;  // argument holding normalized_shape
  size_t outputs = 3;
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
  // Backward: the parameter gradients sum over the split rows.
  row.outputs.assign(ln.outputs, ln.backward ? Partial::make(ReduceOp::kSum) : p);
  row.outputs[0] = p;
  rows.push_back(std::move(row));
  return rows;
}

// The normalized output, then `statistics` per-row tensors (the leading
// dims, ones for the normalized ones).
std::vector<std::vector<int64_t>> layer_norm_shapes(const OpCall& call, size_t statistics) {
  const std::vector<int64_t>& shape = call.input(0).spec->shape();
  const int64_t lead = leading_dims(call, 1, 0);
  std::vector<int64_t> stats(shape.begin(), shape.begin() + lead);
  stats.resize(shape.size(), 1);
  std::vector<std::vector<int64_t>> shapes(statistics + 1, stats);
  shapes[0] = shape;
  return shapes;
}

// The input gradient, then `parameters` gradients of normalized_shape
// (arguments: grad_out, input, normalized_shape, statistics..., weight?, ...).
std::vector<std::vector<int64_t>> layer_norm_backward_shapes(const OpCall& call,
                                                             size_t parameters) {
  std::vector<std::vector<int64_t>> shapes(parameters + 1, call.argument(2).toIntVector());
  shapes[0] = call.input(1).spec->shape();
  return shapes;
}

Strategy layer_norm_strategy(const LayerNorm& ln) {
  Strategy strategy;
  strategy.rows = [ln](const OpCall& call, int64_t m) { return layer_norm_rows(call, m, ln); };
  const size_t extra = ln.outputs - 1;
  if (ln.backward) {
    strategy.output_shapes = [extra](const OpCall& call) {
      return layer_norm_backward_shapes(call, extra);
    };
  } else {
    strategy.output_shapes = [extra](const OpCall& call) { return layer_norm_shapes(call, extra); };
  }
  return strategy;
}

}  // namespace

DTENSOR_REGISTER(normalization_strategies) {
  Registry<Strategy>& registry = strategies();
  add_to_existing(registry, {"aten::native_layer_norm"}, layer_norm_strategy({false, 0, 1}));
  add_to_existing(registry, {"aten::native_layer_norm_backward"},
                  layer_norm_strategy({true, 1, 2}));
  // (input, normalized_shape, weight?, eps?) -> (out, rstd) and
  // (grad_out, input, normalized_shape, rstd, weight?, mask) -> (grad_input, grad_weight).
  add_to_existing(registry, {"aten::_fused_rms_norm"}, layer_norm_strategy({false, 0, 1, 2}));
  add_to_existing(registry, {"aten::_fused_rms_norm_backward"},
                  layer_norm_strategy({true, 1, 2, 2}));
}

}  // namespace dtensor
