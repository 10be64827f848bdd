// Copyright 2026 The dtensor Authors.
//
// Any change on mesh dims whose group is a single rank (a dp=1 dim of a 2-D
// mesh, a 1-rank mesh): that rank holds the same elements before and after,
// and a Partial of one term is already the value, so nothing is
// communicated. The elements are copied (a redistribute's result never
// shares memory with its source) unless the source is given up. DTENSOR_SINGLE_RANK_COLLECTIVES=1
// turns this off (transition.h).
#include <ATen/ATen.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/redistribute/transition.h>

namespace dtensor {
namespace {

class SingleRankGroup final : public Transition {
 public:
  std::string_view collective() const override { return "local"; }
  // Ahead of every transition that would run a collective on the one rank.
  int priority() const override { return -100; }
  // Groups of one rank only.
  bool may_change_non_replicated_locally() const override { return false; }

  bool applies(const StepContext& step) const override {
    if (step.group_size() != 1 || single_rank_groups_communicate()) return false;
    const LocalLayout& before = step.my_source_layout();
    const LocalLayout& after = step.my_target_layout();
    // Holds for every placement whose one-rank layout keeps everything (the
    // placement contract); checked rather than assumed.
    return before.local_shape == after.local_shape &&
           before.merged_leading_dims == after.merged_leading_dims &&
           before.global_indices() == after.global_indices();
  }

  int64_t bytes(const StepContext& step) const override {
    return step.my_source_layout().local_numel() * step.element_size();
  }

  at::Tensor run(const at::Tensor& local, const StepContext& /*step*/) const override {
    return pooled_clone(local);
  }

  at::Tensor run_consuming(at::Tensor local, const StepContext& /*step*/) const override {
    return pooled_contiguous(local);
  }
};

}  // namespace

DTENSOR_REGISTER(single_rank_group) {
  transitions().add("*->*", std::make_shared<SingleRankGroup>());
}

}  // namespace dtensor
