// Copyright 2026 The dtensor Authors.
//
// Transitions out of and into Partial on one mesh dim:
//  * Partial -> Replicate: one all-reduce.
//  * Partial -> a split whose pieces are consecutive blocks of one dim in
//    group order (Shard, Ragged): one reduce-scatter-v, never an all-reduce.
//  * Replicate -> Partial (internal path only): no communication; exact,
//    because every rank but coordinate 0 holds the op's identity (0 for sum
//    and bxor, 1 for product) and idempotent ops (avg, max, min, band, bor)
//    keep the value everywhere.
#include <ATen/ATen.h>

#include "dtensor/redistribute/index_exchange.h"
#include "dtensor/redistribute/transition.h"

namespace dtensor {
namespace {

using redistribute_internal::merge_leading_dims;

class PartialToReplicate final : public Transition {
 public:
  std::string_view collective() const override { return "all_reduce"; }

  bool applies(const StepContext& step) const override {
    return step.source_placement().is_partial() && step.target_placement().is_replicate();
  }

  int64_t bytes(const StepContext& step) const override {
    const int64_t n = step.group_size();
    return 2 * (n - 1) * step.my_source_layout().local_numel() * step.element_size() / n;
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    at::Tensor result = local.clone();
    step.communicator()->all_reduce(result, *step.source_placement().partial_op());
    return result;
  }
};

// The local dim the target splits into consecutive blocks, or -1.
int64_t block_dim(const StepContext& step) {
  if (!step.target_placement().splits_into_ordered_blocks()) return -1;
  return StepContext::local_split_dim(step.target_placement(), step.target_merged());
}

class PartialToBlocks final : public Transition {
 public:
  std::string_view collective() const override { return "reduce_scatter_v"; }

  bool applies(const StepContext& step) const override {
    return step.source_placement().is_partial() && !step.target_placement().is_partial() &&
           !step.target_placement().is_replicate() && block_dim(step) >= 0;
  }

  int64_t bytes(const StepContext& step) const override {
    const int64_t n = step.group_size();
    return (n - 1) * step.my_source_layout().local_numel() * step.element_size() / n;
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    const LocalLayout& target = step.my_target_layout();
    const int64_t dim = block_dim(step);
    const auto merged = merge_leading_dims(local, step.my_source_layout(), step.source().shape(),
                                           target.merged_leading_dims);
    at::Tensor input = merged.local.movedim(dim, 0).contiguous();
    std::vector<int64_t> rows;
    for (int64_t p = 0; p < step.group_size(); ++p) {
      rows.push_back(static_cast<int64_t>(step.target_layout(p).global_indices[dim].size()));
    }
    std::vector<int64_t> out_shape(input.sizes().begin(), input.sizes().end());
    out_shape[0] = rows[step.group_rank()];
    at::Tensor output = at::empty(out_shape, local.options());
    step.communicator()->reduce_scatter_v(input, output, rows,
                                          *step.source_placement().partial_op());
    return output.movedim(0, dim).contiguous().reshape(target.local_shape);
  }
};

class ReplicateToPartial final : public Transition {
 public:
  std::string_view collective() const override { return "local"; }

  bool applies(const StepContext& step) const override {
    return step.source_placement().is_replicate() && step.target_placement().is_partial();
  }

  int64_t bytes(const StepContext& step) const override {
    return step.my_source_layout().local_numel() * step.element_size();
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    if (step.group_rank() == 0) return local.clone();
    switch (*step.target_placement().partial_op()) {
      case ReduceOp::kSum:
      case ReduceOp::kBxor:
        return at::zeros_like(local);
      case ReduceOp::kProduct:
        return at::ones_like(local);
      default:
        return local.clone();
    }
  }
};

DTENSOR_REGISTER_TRANSITION(PartialToReplicate);
DTENSOR_REGISTER_TRANSITION(PartialToBlocks);
DTENSOR_REGISTER_TRANSITION(ReplicateToPartial);

}  // namespace
}  // namespace dtensor
