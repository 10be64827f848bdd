// Copyright 2026 The dtensor Authors.
//
// rules/families/embedding_ops.cc: embedding lookups and their backward.
//
// Column-wise (weight split on the embedding dim): each rank looks up its
// columns. Row-wise (weight split on the vocabulary into ordered blocks,
// even or not):
// each rank looks up the ids it owns, writes zeros for the others, and the
// output is Partial(sum) — the "masked Partial". Split ids pass their split
// to the output's matching dim.
#include <ATen/ATen.h>

#include "placements/partial.h"
#include "placements/replicate.h"
#include "rules/propagation.h"
#include "rules/registration.h"
#include "rules/roles.h"

namespace dtensor {
namespace {

// OpCall inputs: 0 = weight [V, D], 1 = indices.
std::vector<ShardingRow> embedding_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  const PlacementPtr& w = call.placement(0, m);
  const PlacementPtr& ids = call.placement(1, m);
  const int64_t id_dims = call.input(1).spec->ndim();
  if (const auto dim = split_dim_of(*w); dim && w->merged_leading_dims() <= 1) {
    if (*dim == 1 && w->fills_role(RuleRole::kPassThrough)) {
      if (PlacementPtr out = w->moved_to_dim(id_dims)) rows.push_back({{w, Replicate::make()}, {out}});
    } else if (*dim == 0 && w->splits_into_ordered_blocks()) {
      rows.push_back({{w, Replicate::make()}, {Partial::make(ReduceOp::kSum)}});
    }
  }
  if (const auto dim = split_dim_of(*ids)) {
    if (PlacementPtr out = move_for_role(*ids, RuleRole::kPassThrough, *dim)) {
      rows.push_back({{Replicate::make(), ids}, {out}});
    }
  }
  rows.push_back({{Replicate::make(), Replicate::make()}, {Replicate::make()}});
  return rows;
}

// Looks up only the rows this rank holds when the weight is split by rows.
void embedding_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                      const LocalContext& context) {
  const LocalLayout& layout = context.propagation.input_targets[0]->local_layout();
  const int64_t vocab = context.call.input(0).spec->shape()[0];
  const int64_t rows = layout.local_shape[0];
  if (rows == vocab) {
    op.callBoxed(stack);
    return;
  }
  const int64_t first = layout.global_offset[0];
  const at::Tensor ids = stack[1].toTensor();
  const at::Tensor outside = (ids < first).logical_or_(ids >= first + rows);
  stack[1] = (ids - first).masked_fill_(outside, 0);
  if (rows == 0) {
    // Nothing to look up: a zero row of the right width stands in.
    stack[0] = at::zeros({1, stack[0].toTensor().size(1)}, stack[0].toTensor().options());
  }
  op.callBoxed(stack);
  at::Tensor out = stack.back().toTensor();
  out.masked_fill_(outside.unsqueeze(-1), 0);
}

// embedding_dense_backward(grad [.., D], ids, num_weights, padding_idx, scale)
std::vector<ShardingRow> embedding_backward_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  const PlacementPtr& g = call.placement(0, m);
  const PlacementPtr& ids = call.placement(1, m);
  const int64_t grad_dims = call.input(0).spec->ndim();
  const auto dim = split_dim_of(*g);
  if (dim && *dim == grad_dims - 1 && g->fills_role(RuleRole::kPassThrough)) {
    if (PlacementPtr out = g->moved_to_dim(1)) rows.push_back({{g, Replicate::make()}, {out}});
  }
  // Ids split like the gradient's batch dims: each rank adds its rows' terms.
  if (dim && *dim < grad_dims - 1 && g->fills_role(RuleRole::kContraction)) {
    if (PlacementPtr moved = move_for_role(*g, RuleRole::kContraction, *dim)) {
      rows.push_back({{g, moved}, {Partial::make(ReduceOp::kSum)}});
    }
  }
  if (g->partial_op() == ReduceOp::kSum && ids->is_replicate()) rows.push_back({{g, ids}, {g}});
  return rows;
}

}  // namespace

DTENSOR_REGISTER_RULES(embedding) {
  OpRule forward;
  forward.strategy = embedding_rows;
  forward.local_kernel = embedding_kernel;
  forward.output_shapes = [](const OpCall& call) {
    std::vector<int64_t> shape = call.input(1).spec->shape();
    shape.push_back(call.input(0).spec->shape()[1]);
    return std::vector<std::vector<int64_t>>{shape};
  };
  add_to_existing(registry, {"aten::embedding"}, forward);
  OpRule backward;
  backward.strategy = embedding_backward_rows;
  backward.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{
        {call.argument(2).toInt(), call.input(0).spec->shape().back()}};
  };
  add_to_existing(registry, {"aten::embedding_dense_backward"}, backward);
}

}  // namespace dtensor
