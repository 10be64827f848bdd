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

  // Out of place: the source keeps its values without a copy being made.
  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    at::Tensor result = at::empty(local.sizes(), local.options());
    step.communicator()->all_reduce(local, result, *step.source_placement().partial_op());
    return result;
  }
};

// The local dim the target splits into consecutive blocks, or -1.
int64_t block_dim(const StepContext& step) {
  if (!step.target_placement().splits_into_ordered_blocks()) return -1;
  return StepContext::local_split_dim(step.target_placement(), step.target_merged());
}

// What a reduce-scatter derives from its step alone.
struct Scatter {
  int64_t dim = 0;                    // of the merged local tensor
  std::vector<int64_t> rows;          // each member's block along `dim`
  std::vector<int64_t> output_shape;  // this rank's block, `dim` moved first
};

Scatter make_scatter(const StepContext& step, const at::Tensor& merged_local) {
  Scatter scatter;
  scatter.dim = block_dim(step);
  for (int64_t p = 0; p < step.group_size(); ++p) {
    scatter.rows.push_back(
        static_cast<int64_t>(step.target_layout(p).global_indices()[scatter.dim].size()));
  }
  const at::Tensor moved = merged_local.movedim(scatter.dim, 0);
  scatter.output_shape.assign(moved.sizes().begin(), moved.sizes().end());
  scatter.output_shape[0] = scatter.rows[step.group_rank()];
  return scatter;
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
    const auto merged = merge_leading_dims(local, step.my_source_layout(), step.source().shape(),
                                           target.merged_leading_dims);
    const Scatter& scatter =
        step.derived<Scatter>([&] { return make_scatter(step, merged.local); });
    at::Tensor input = merged.local.movedim(scatter.dim, 0).contiguous();
    at::Tensor output = at::empty(scatter.output_shape, local.options());
    step.communicator()->reduce_scatter_v(input, output, scatter.rows,
                                          *step.source_placement().partial_op());
    return output.movedim(0, scatter.dim).contiguous().reshape(target.local_shape);
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
