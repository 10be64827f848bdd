// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/kernels/loss_ops.cc: nll_loss (cross_entropy decomposes
// into log_softmax and nll_loss).
//
// The class dim must be whole. A split batch passes through with
// reduction=none and gives Partial(sum) with reduction=sum. reduction=mean
// divides by the total weight of the WHOLE batch, which no rank has: on a
// split batch the forward's local kernel sums its rows, reduces the total
// weight over the mesh dims that split the batch (one all-reduce planned by
// redistribute, dtensor/redistribute/reduce_terms.h), and divides, giving
// Partial(sum) means and a replicated total weight (as PyTorch's loss
// parallel does). The backward receives that total as an input and works on
// a split batch.
#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>
#include <dtensor/redistribute/reduce_terms.h>
#include <dtensor/rules/roles.h>

namespace dtensor {
namespace {

constexpr int64_t kReductionNone = 0;
constexpr int64_t kReductionMean = 1;
constexpr int64_t kReductionSum = 2;

// The batch dim of [N, C] logits (1-D logits have none).
bool batch_split(const OpCall& call, const Placement& p) {
  return call.input(0).spec->ndim() == 2 && split_dim_of(p) == 0 &&
         p.fills_role(RuleRole::kPassThrough);
}

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
std::vector<ShardingRow> forward_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  const PlacementPtr& p = call.placement(0, m);
  if (!batch_split(call, *p)) return rows;
  const int64_t reduction = call.argument("reduction").toInt();
  ShardingRow row;
  row.inputs = {p, p->moved_to_dim(0)};
  if (call.num_inputs() > 2) row.inputs.push_back(Replicate::make());
  const PlacementPtr sum = Partial::make(ReduceOp::kSum);
  const bool mean = reduction == kReductionMean;
  row.outputs = {reduction == kReductionNone ? p->moved_to_dim(0) : sum,
                 mean ? Replicate::make() : sum};
  rows.push_back(std::move(row));
  return rows;
}

void forward_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                    const LocalContext& context) {
  const size_t num_arguments = op.schema().arguments().size();
  c10::IValue& reduction =
      stack[stack.size() - num_arguments + *op.schema().argumentIndexWithName("reduction")];
  // forward_rows splits nothing but the batch.
  const std::vector<int64_t> split = mesh_dims_splitting(context, 0, [](int64_t) { return true; });
  if (split.empty() || reduction.toInt() != kReductionMean) {
    op.callBoxed(stack);
    return;
  }
  reduction = kReductionSum;
  op.callBoxed(stack);
  const at::Tensor total_weight =
      reduce_terms(stack.back().toTensor(), context.mesh, split, ReduceOp::kSum);
  const at::Tensor mean = stack[stack.size() - 2].toTensor().div(total_weight);
  torch::jit::drop(stack, 2);
  stack.push_back(mean);
  stack.push_back(total_weight);
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
std::vector<ShardingRow> backward_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  const PlacementPtr& p = call.placement(1, m);
  if (call.input(1).spec->ndim() != 2 || split_dim_of(*p) != 0 ||
      !p->fills_role(RuleRole::kPassThrough)) {
    return rows;
  }
  const bool per_row = call.argument("reduction").toInt() == kReductionNone;
  ShardingRow row;
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    const size_t argument = call.input(i).argument;
    const bool split = argument == 1 || argument == 2 || (argument == 0 && per_row);
    row.inputs.push_back(split ? p->moved_to_dim(0) : Replicate::make());
  }
  row.outputs = {p};
  rows.push_back(std::move(row));
  return rows;
}

}  // namespace

DTENSOR_REGISTER(loss_ops) {
  Strategy forward;
  forward.rows = forward_rows;
  add_to_existing(strategies(), {"aten::nll_loss_forward"}, forward);
  add_to_existing(local_kernels(), {"aten::nll_loss_forward"}, LocalKernel(forward_kernel));
  Strategy backward;
  backward.rows = backward_rows;
  add_to_existing(strategies(), {"aten::nll_loss_backward"}, backward);
}

}  // namespace dtensor
