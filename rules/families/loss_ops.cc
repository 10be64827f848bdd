// Copyright 2026 The dtensor Authors.
//
// rules/families/loss_ops.cc: nll_loss (cross_entropy decomposes into
// log_softmax and nll_loss).
//
// The class dim must be whole. A split batch passes through with
// reduction=none, gives Partial(sum) with reduction=sum; reduction=mean
// divides by a data-dependent total weight, so the forward needs the whole
// batch, while the backward receives that total as an input and works on a
// split batch.
#include "placements/partial.h"
#include "placements/replicate.h"
#include "rules/registration.h"
#include "rules/roles.h"

namespace dtensor {
namespace {

constexpr int64_t kReductionNone = 0;
constexpr int64_t kReductionMean = 1;

// The batch dim of [N, C] logits (1-D logits have none).
bool batch_split(const OpCall& call, const Placement& p) {
  return call.input(0).spec->ndim() == 2 && split_dim_of(p) == 0 &&
         p.fills_role(RuleRole::kPassThrough);
}

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
std::vector<ShardingRow> forward_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  const PlacementPtr& p = call.placement(0, m);
  const int64_t reduction = call.argument("reduction").toInt();
  if (!batch_split(call, *p) || reduction == kReductionMean) return rows;
  ShardingRow row;
  row.inputs = {p, p->moved_to_dim(0)};
  if (call.num_inputs() > 2) row.inputs.push_back(Replicate::make());
  const PlacementPtr sum = Partial::make(ReduceOp::kSum);
  row.outputs = {reduction == kReductionNone ? p->moved_to_dim(0) : sum, sum};
  rows.push_back(std::move(row));
  return rows;
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

DTENSOR_REGISTER_RULES(loss) {
  OpRule forward;
  forward.strategy = forward_rows;
  add_to_existing(registry, {"aten::nll_loss_forward"}, forward);
  OpRule backward;
  backward.strategy = backward_rows;
  add_to_existing(registry, {"aten::nll_loss_backward"}, backward);
}

}  // namespace dtensor
