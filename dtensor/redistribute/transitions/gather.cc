// Copyright 2026 The dtensor Authors.
//
// A split -> Replicate: one all-gather-v of every member's piece along the
// split dim, then one reorder when the pieces are not consecutive
// (StridedShard, user placements). Covers Shard, StridedShard, Ragged (rows)
// and any user placement that splits one dim.
#include <ATen/ATen.h>

#include "absl/container/flat_hash_map.h"
#include "dtensor/redistribute/index_exchange.h"
#include "dtensor/redistribute/transition.h"

namespace dtensor {
namespace {

using redistribute_internal::merged_lists;

// The local dim the source placement splits (rows for a Ragged), or -1.
int64_t gathered_dim(const StepContext& step) {
  return StepContext::local_split_dim(step.source_placement(), step.source_merged());
}

class GatherToReplicate final : public Transition {
 public:
  std::string_view collective() const override { return "all_gather_v"; }

  bool applies(const StepContext& step) const override {
    return !step.source_placement().is_partial() && !step.source_placement().is_replicate() &&
           step.target_placement().is_replicate() && gathered_dim(step) >= 0;
  }

  int64_t bytes(const StepContext& step) const override {
    const int64_t n = step.group_size();
    return (n - 1) * step.my_target_layout().local_numel() * step.element_size() / n;
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    const int64_t dim = gathered_dim(step);
    const int64_t merged = step.source_merged();
    at::Tensor input = local.movedim(dim, 0).contiguous();
    std::vector<int64_t> rows;
    std::vector<int64_t> gathered_order;
    for (int64_t p = 0; p < step.group_size(); ++p) {
      const std::vector<int64_t>& piece = step.source_layout(p).global_indices[dim];
      rows.push_back(static_cast<int64_t>(piece.size()));
      gathered_order.insert(gathered_order.end(), piece.begin(), piece.end());
    }
    std::vector<int64_t> out_shape(input.sizes().begin(), input.sizes().end());
    out_shape[0] = static_cast<int64_t>(gathered_order.size());
    at::Tensor output = at::empty(out_shape, local.options());
    step.communicator()->all_gather_v(input, output, rows);
    const auto target = merged_lists(step.my_target_layout(), step.target().shape(), merged);
    if (gathered_order != target[dim])
      output = output.index_select(0, reorder(gathered_order, target[dim], local.device()));
    return output.movedim(0, dim).contiguous().reshape(step.my_target_layout().local_shape);
  }

 private:
  // For each target index, where the gather put it.
  static at::Tensor reorder(const std::vector<int64_t>& gathered,
                            const std::vector<int64_t>& target, c10::Device device) {
    absl::flat_hash_map<int64_t, int64_t> position;
    for (size_t i = 0; i < gathered.size(); ++i) position.emplace(gathered[i], i);
    std::vector<int64_t> order;
    order.reserve(target.size());
    for (int64_t index : target) order.push_back(position.at(index));
    return at::tensor(order, at::kLong).to(device);
  }
};

DTENSOR_REGISTER_TRANSITION(GatherToReplicate);

}  // namespace
}  // namespace dtensor
