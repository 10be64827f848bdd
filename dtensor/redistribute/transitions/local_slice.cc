// Copyright 2026 The dtensor Authors.
//
// Replicate -> anything that splits (Shard, StridedShard, Ragged, user
// placements): every needed element is already here, so keep them with a
// local slice and no communication.
#include <optional>

#include <ATen/ATen.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/base/check.h>
#include <dtensor/redistribute/index_exchange.h>
#include <dtensor/redistribute/transition.h>

namespace dtensor {
namespace {

using redistribute_internal::box_of;
using redistribute_internal::gather_positions;
using redistribute_internal::merge_leading_dims;
using redistribute_internal::MergedLocal;
using redistribute_internal::Narrow;
using redistribute_internal::narrow_to;
using redistribute_internal::shared_positions;
using redistribute_internal::SharedPositions;

class LocalSlice final : public Transition {
 public:
  std::string_view collective() const override { return "local"; }
  // From placements that replicate only (applies()).
  bool may_change_non_replicated_locally() const override { return false; }

  bool applies(const StepContext& step) const override {
    return step.source_placement().is_replicate() && !step.target_placement().is_partial() &&
           step.source_merged() <= step.target_merged();
  }

  int64_t bytes(const StepContext& step) const override {
    return step.my_target_layout().local_numel() * step.element_size();
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    // A redistribute's result never shares memory with its source.
    at::Tensor out = kept(local, step);
    return out.is_alias_of(local) ? pooled_clone(out) : out;
  }

  // No copy where the kept elements are contiguous (a Shard of the first
  // dim that is split, say): the result is a view of the source's memory.
  at::Tensor run_consuming(at::Tensor local, const StepContext& step) const override {
    return pooled_contiguous(kept(local, step));
  }

 private:
  // What a local slice derives from its step alone.
  struct Slice {
    std::vector<int64_t> merged_shape;  // the source with the target's dims merged into rows
    std::vector<std::vector<int64_t>> positions;  // per dim, in the source, in target order
    // Set when no dims merge and every dim keeps one range: the narrows to take.
    std::optional<std::vector<Narrow>> box;
  };

  static Slice make_slice(const at::Tensor& local, const StepContext& step) {
    const LocalLayout& target = step.my_target_layout();
    const MergedLocal merged = merge_leading_dims(
        local, step.my_source_layout(), step.source().shape(), target.merged_leading_dims);
    SharedPositions positions = shared_positions(target.global_indices(), merged.lists);
    const int64_t needed = target.local_numel();
    DTENSOR_CHECK(positions.numel() == needed, "redistribute: internal: a local slice to ",
                  placements_to_string(step.target().placements()), " found ", positions.numel(),
                  " of the ", needed, " elements it needs");
    Slice slice{merged.local.sizes().vec(), std::move(positions.wanted), std::nullopt};
    if (merged.local.sizes() == local.sizes()) slice.box = box_of(slice.positions, local.sizes());
    return slice;
  }

  // The elements the calling rank keeps, laid out as its target shard: a view
  // of `local` where one narrow per dim takes them (the common case, a Shard
  // of Replicate, in one op: small slices are all fixed cost), else
  // whatever gathering them gives.
  static at::Tensor kept(const at::Tensor& local, const StepContext& step) {
    const Slice& slice = step.derived<Slice>([&] { return make_slice(local, step); });
    if (slice.box) return narrow_to(local, *slice.box);
    return gather_positions(local.reshape(slice.merged_shape), slice.positions)
        .reshape(step.my_target_layout().local_shape);
  }
};

}  // namespace

DTENSOR_REGISTER(local_slice) { transitions().add("R->*", std::make_shared<LocalSlice>()); }

}  // namespace dtensor
