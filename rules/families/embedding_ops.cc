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
//
// The backward of a row-wise weight: embedding_dense_backward sees only the
// gradient and the ids, so it cannot know that each rank needs only its own
// rows. dtensor::embedding_backward_for_layout is the same op with the
// weight's placements as an argument (DTensor's autograd calls it, see
// dtensor/autograd/embedding_backward.cc): on the mesh dims that split the
// weight's rows each rank computes its rows' gradient alone, laid out like
// the weight, never the whole [vocab, dim] gradient.
#include <ATen/ATen.h>

#include <dtensor/base/check.h>
#include <dtensor/placements/parse.h>
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/rules/index_range.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>
#include <dtensor/rules/roles.h>

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
      if (PlacementPtr out = w->moved_to_dim(id_dims))
        rows.push_back({{w, Replicate::make()}, {out}});
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
  const LocalLayout& layout = context.propagation().input_targets[0]->local_layout();
  const int64_t vocab = context.call().input(0).spec->shape()[0];
  const int64_t rows = layout.local_shape[0];
  if (rows == vocab) {
    op.callBoxed(stack);
    return;
  }
  const int64_t first = layout.global_offset[0];
  const at::Tensor ids = stack[1].toTensor();
  check_indices_in_range(ids, vocab, "aten::embedding", "id");
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
  // Ids split like the gradient's batch dims: each rank adds its rows' terms,
  // unless each term is divided by its id's count over the WHOLE batch.
  const bool scale_grad_by_freq = call.argument(4).toBool();
  if (dim && *dim < grad_dims - 1 && g->fills_role(RuleRole::kContraction) && !scale_grad_by_freq) {
    if (PlacementPtr moved = move_for_role(*g, RuleRole::kContraction, *dim)) {
      rows.push_back({{g, moved}, {Partial::make(ReduceOp::kSum)}});
    }
  }
  if (g->partial_op() == ReduceOp::kSum && ids->is_replicate()) rows.push_back({{g, ids}, {g}});
  return rows;
}

// Whether the weight placement `p` splits the rows into blocks each rank can
// compute the gradient of alone.
bool splits_rows(const Placement& p) {
  return split_dim_of(p) == 0 && p.merged_leading_dims() <= 1 && p.splits_into_ordered_blocks();
}

// (grad, indices, num_weights, padding_idx, scale_grad_by_freq, weight_placements)
std::vector<ShardingRow> backward_for_layout_rows(const OpCall& call, int64_t m) {
  const std::vector<PlacementPtr> weight = parse_placements(call.argument(5).toStringRef());
  DTENSOR_CHECK(static_cast<int64_t>(weight.size()) == call.mesh().ndim(), call.op_name(),
                ": expected the weight's placements for the ", call.mesh().ndim(),
                " mesh dims, found ", weight.size());
  if (splits_rows(*weight[m])) return {{{Replicate::make(), Replicate::make()}, {weight[m]}}};
  std::vector<ShardingRow> rows = embedding_backward_rows(call, m);
  rows.push_back(replicate_row(call));
  return rows;
}

// The gradient of the rows the output's layout gives this rank: ids of other
// rows go to one extra row (which also takes the padding when the padding id
// is not ours), dropped afterwards; counts for scale_grad_by_freq stay exact.
void backward_for_layout_kernel(const c10::OperatorHandle&, torch::jit::Stack& stack,
                                const LocalContext& context) {
  const at::Tensor grad = stack[0].toTensor();
  const at::Tensor ids = stack[1].toTensor();
  const int64_t num_weights = stack[2].toInt();
  const int64_t padding_idx = stack[3].toInt();
  const bool scale_grad_by_freq = stack[4].toBool();
  const LocalLayout& layout =
      context.propagation().output_spec(0, grad.scalar_type(), context.mesh())->local_layout();
  const int64_t rows = layout.local_shape[0];
  at::Tensor result;
  if (rows == num_weights) {
    result = at::embedding_dense_backward(grad, ids, num_weights, padding_idx, scale_grad_by_freq);
  } else {
    const int64_t first = rows == 0 ? 0 : layout.global_offset[0];
    const bool owns_padding = padding_idx >= first && padding_idx < first + rows;
    const at::Tensor outside = (ids < first).logical_or_(ids >= first + rows);
    result =
        at::embedding_dense_backward(grad, (ids - first).masked_fill_(outside, rows), rows + 1,
                                     owns_padding ? padding_idx - first : rows, scale_grad_by_freq)
            .narrow(0, 0, rows);
  }
  torch::jit::drop(stack, stack.size());
  stack.push_back(std::move(result));
}

}  // namespace

DTENSOR_REGISTER(embedding_strategies) {
  Strategy forward;
  forward.rows = embedding_rows;
  forward.output_shapes = [](const OpCall& call) {
    std::vector<int64_t> shape = call.input(1).spec->shape();
    shape.push_back(call.input(0).spec->shape()[1]);
    return std::vector<std::vector<int64_t>>{shape};
  };
  add_to_existing(strategies(), {"aten::embedding"}, forward);
  Strategy backward;
  backward.rows = embedding_backward_rows;
  backward.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{
        {call.argument(2).toInt(), call.input(0).spec->shape().back()}};
  };
  add_to_existing(strategies(), {"aten::embedding_dense_backward"}, backward);
  Strategy for_layout;
  for_layout.rows = backward_for_layout_rows;
  for_layout.output_shapes = backward.output_shapes;
  // The op is dtensor's own (dtensor/dispatch/operator_library.cc).
  strategies().add("dtensor::embedding_backward_for_layout", for_layout);
}

DTENSOR_REGISTER(embedding_kernels) {
  add_to_existing(local_kernels(), {"aten::embedding"}, LocalKernel(embedding_kernel));
  local_kernels().add("dtensor::embedding_backward_for_layout",
                      LocalKernel(backward_for_layout_kernel));
}

}  // namespace dtensor
