// Copyright 2026 The dtensor Authors.
//
// Replicate -> anything that splits (Shard, StridedShard, Ragged, user
// placements): every needed element is already here, so keep them with a
// local slice and no communication.
#include <ATen/ATen.h>

#include "dtensor/base/check.h"
#include "dtensor/redistribute/index_exchange.h"
#include "dtensor/redistribute/transition.h"

namespace dtensor {
namespace {

using redistribute_internal::gather_positions;
using redistribute_internal::merge_leading_dims;
using redistribute_internal::shared_positions;

class LocalSlice final : public Transition {
 public:
  std::string_view collective() const override { return "local"; }

  bool applies(const StepContext& step) const override {
    return step.source_placement().is_replicate() && !step.target_placement().is_partial() &&
           step.source_merged() <= step.target_merged();
  }

  int64_t bytes(const StepContext& step) const override {
    return step.my_target_layout().local_numel() * step.element_size();
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    const LocalLayout& target = step.my_target_layout();
    const auto merged = merge_leading_dims(local, step.my_source_layout(), step.source().shape(),
                                           target.merged_leading_dims);
    // Positions in the source of each target index, in target order.
    const auto positions = shared_positions(target.global_indices, merged.lists);
    const int64_t needed = target.local_numel();
    DTENSOR_CHECK(positions.numel() == needed, "redistribute: internal: a local slice to ",
                  placements_to_string(step.target().placements()), " found ", positions.numel(),
                  " of the ", needed, " elements it needs");
    return gather_positions(merged.local, positions.wanted).reshape(target.local_shape);
  }
};

DTENSOR_REGISTER_TRANSITION(LocalSlice);

}  // namespace
}  // namespace dtensor
