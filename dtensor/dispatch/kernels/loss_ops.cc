// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/kernels/loss_ops.cc: nll_loss (cross_entropy decomposes
// into log_softmax and nll_loss), over a split batch or split classes.
//
// A split batch passes through with reduction=none and gives Partial(sum)
// with reduction=sum. reduction=mean divides by the total weight of the
// WHOLE batch, which no rank has: the forward's local kernel sums its rows,
// reduces the total weight over the mesh dims that split the batch (one
// all-reduce planned by redistribute, dtensor/redistribute/reduce_terms.h),
// and divides, giving Partial(sum) means and a replicated total weight.
//
// Split classes (vocabulary-parallel logits, as PyTorch's loss_parallel):
// each rank scores the rows whose target is in its block of classes and
// writes zero for the others, so the loss is Partial(sum) whatever the
// reduction; the total weight needs only the (replicated) targets. The
// backward of either receives the total as an input and works on the shard.
#include <ATen/ATen.h>

#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/redistribute/reduce_terms.h>
#include <dtensor/rules/index_range.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/registration.h>
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

// The class dim of [N, C] logits, split into ordered blocks (vocabulary
// parallel): each rank scores the targets in its block of classes.
bool class_split(const DTensorSpec& logits, const Placement& p) {
  return logits.ndim() == 2 && split_dim_of(p) == 1 && p.merged_leading_dims() == 0 &&
         p.splits_into_ordered_blocks();
}

// nll_loss_forward(self, target, weight?, reduction, ignore_index) -> (output, total_weight)
std::vector<ShardingRow> forward_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  const PlacementPtr& p = call.placement(0, m);
  const int64_t reduction = call.argument("reduction").toInt();
  const PlacementPtr sum = Partial::make(ReduceOp::kSum);
  ShardingRow row;
  if (batch_split(call, *p)) {
    row.inputs = {p, p->moved_to_dim(0)};
    const bool mean = reduction == kReductionMean;
    row.outputs = {reduction == kReductionNone ? p->moved_to_dim(0) : sum,
                   mean ? Replicate::make() : sum};
  } else if (class_split(*call.input(0).spec, *p)) {
    // Each row's loss is on the rank holding its target; every rank computes
    // the total weight from the whole targets.
    row.inputs = {p, Replicate::make()};
    row.outputs = {sum, Replicate::make()};
  } else {
    return rows;
  }
  if (call.num_inputs() > 2) row.inputs.push_back(Replicate::make());
  rows.push_back(std::move(row));
  return rows;
}

// The mesh dims that split the logits' batch dim and their class dim.
struct LossSplits {
  std::vector<int64_t> batch;
  std::vector<int64_t> classes;
};

LossSplits loss_splits(const LocalContext& context, size_t logits) {
  if (context.propagation().input_targets[logits]->ndim() != 2) return {};
  return {mesh_dims_splitting(context, logits, [](int64_t dim) { return dim == 0; }),
          mesh_dims_splitting(context, logits, [](int64_t dim) { return dim == 1; })};
}

// The class weights, when the call gives any (None and an undefined tensor
// both mean none).
c10::optional<at::Tensor> weight_of(const c10::IValue& weight) {
  if (weight.isNone() || !weight.toTensor().defined()) return c10::nullopt;
  return weight.toTensor();
}

// What a rank holding classes [first, first + count) of the logits passes to
// the op on its shard: the targets it holds, renumbered from 0, every other
// row (and every ignored one) ignored as -1, and its slice of the weight.
struct LocalClasses {
  at::Tensor target;
  c10::optional<at::Tensor> weight;
  at::Tensor valid;  // rows whose target is not ignore_index
};

LocalClasses local_classes(const LocalContext& context, size_t logits, const at::Tensor& target,
                           const c10::optional<at::Tensor>& weight, int64_t ignore_index) {
  const DTensorSpec& spec = *context.propagation().input_targets[logits];
  const int64_t first = spec.local_layout().global_offset[1];
  const int64_t count = spec.local_layout().local_shape[1];
  LocalClasses out;
  out.valid = target.ne(ignore_index);
  // A target outside every rank's block would count as nothing on all. The
  // ranks that split the batch hold different targets: they agree first, so
  // that all raise (none waits for the others in a later collective).
  const std::optional<std::string> problem =
      indices_out_of_range(target, spec.shape()[1], context.call().op_name(), "target", out.valid);
  const std::vector<int64_t> batch = loss_splits(context, logits).batch;
  const bool everywhere_fine =
      batch.empty()
          ? !problem
          : reduce_terms(at::full({}, problem ? 0 : 1, at::kInt).to(context.mesh().device()),
                         context.mesh(), batch, ReduceOp::kMin)
                    .item<int>() == 1;
  DTENSOR_CHECK(everywhere_fine,
                problem
                    ? *problem
                    : context.call().op_name() + ": expected every target in [0, " +
                          std::to_string(spec.shape()[1]) + "), found one outside on another rank");
  const at::Tensor mine =
      out.valid.logical_and(target.ge(first)).logical_and_(target.lt(first + count));
  out.target = at::where(mine, target - first, at::full({}, -1, target.options()));
  if (weight) out.weight = weight->narrow(0, first, count);
  return out;
}

// The total weight of the rows the rank holds targets of (all of them along
// a class split): the weights of their targets, or their count.
at::Tensor total_weight_of(const at::Tensor& target, const at::Tensor& valid,
                           const c10::optional<at::Tensor>& weight, at::ScalarType dtype) {
  if (!weight) return valid.sum().to(dtype);
  const at::Tensor safe = at::where(valid, target, at::zeros({}, target.options()));
  return weight->index_select(0, safe).mul(valid).sum().to(dtype);
}

// The class-split forward: the op on the shard with local targets (sum for
// mean), then the mean divided by the whole batch's total weight.
void class_split_forward(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                         const LocalContext& context, const LossSplits& splits) {
  const at::Tensor self = stack[0].toTensor();
  const at::Tensor target = stack[1].toTensor();
  const c10::optional<at::Tensor> weight = weight_of(stack[2]);
  const int64_t reduction = stack[3].toInt();
  const LocalClasses local = local_classes(context, 0, target, weight, stack[4].toInt());
  at::Tensor output;
  if (self.size(1) == 0) {  // an empty block of classes scores nothing
    output = reduction == kReductionNone ? at::zeros({self.size(0)}, self.options())
                                         : at::zeros({}, self.options());
  } else {
    torch::jit::Stack call = {self, local.target, local.weight,
                              reduction == kReductionMean ? kReductionSum : reduction, int64_t{-1}};
    op.callBoxed(call);
    output = call[0].toTensor();
  }
  at::Tensor total = reduction == kReductionNone
                         ? at::zeros({}, self.options())
                         : total_weight_of(target, local.valid, weight, self.scalar_type());
  if (reduction == kReductionMean) {
    total = reduce_terms(total, context.mesh(), splits.batch, ReduceOp::kSum);
    output = output.div(total);
  }
  torch::jit::drop(stack, stack.size());
  stack.push_back(output);
  stack.push_back(total);
}

void forward_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                    const LocalContext& context) {
  const LossSplits splits = loss_splits(context, 0);
  if (!splits.classes.empty()) return class_split_forward(op, stack, context, splits);
  c10::IValue& reduction = stack[3];
  if (splits.batch.empty() || reduction.toInt() != kReductionMean) {
    op.callBoxed(stack);
    return;
  }
  reduction = kReductionSum;
  op.callBoxed(stack);
  const at::Tensor total_weight =
      reduce_terms(stack.back().toTensor(), context.mesh(), splits.batch, ReduceOp::kSum);
  const at::Tensor mean = stack[stack.size() - 2].toTensor().div(total_weight);
  torch::jit::drop(stack, 2);
  stack.push_back(mean);
  stack.push_back(total_weight);
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
std::vector<ShardingRow> backward_rows(const OpCall& call, int64_t m) {
  std::vector<ShardingRow> rows;
  const PlacementPtr& p = call.placement(1, m);
  const bool batch = call.input(1).spec->ndim() == 2 && split_dim_of(*p) == 0 &&
                     p->fills_role(RuleRole::kPassThrough);
  if (!batch && !class_split(*call.input(1).spec, *p)) return rows;
  const bool per_row = call.argument("reduction").toInt() == kReductionNone;
  ShardingRow row;
  for (size_t i = 0; i < call.num_inputs(); ++i) {
    const size_t argument = call.input(i).argument;
    const bool split = argument == 1 || (batch && (argument == 2 || (argument == 0 && per_row)));
    row.inputs.push_back(split ? (argument == 1 ? p : p->moved_to_dim(0)) : Replicate::make());
  }
  row.outputs = {p};
  rows.push_back(std::move(row));
  return rows;
}

// The class-split backward: the op on the shard with local targets; the
// whole batch's total weight is an input already.
void backward_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                     const LocalContext& context) {
  if (loss_splits(context, 1).classes.empty()) {
    op.callBoxed(stack);
    return;
  }
  const at::Tensor self = stack[1].toTensor();
  at::Tensor grad;
  if (self.size(1) == 0) {
    grad = at::zeros_like(self);
  } else {
    const LocalClasses local =
        local_classes(context, 1, stack[2].toTensor(), weight_of(stack[3]), stack[5].toInt());
    stack[2] = local.target;
    stack[3] = local.weight;
    stack[5] = int64_t{-1};
    op.callBoxed(stack);
    grad = stack[0].toTensor();
  }
  torch::jit::drop(stack, stack.size());
  stack.push_back(grad);
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
  add_to_existing(local_kernels(), {"aten::nll_loss_backward"}, LocalKernel(backward_kernel));
}

}  // namespace dtensor
