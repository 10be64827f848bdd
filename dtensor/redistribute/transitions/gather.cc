// Copyright 2026 The dtensor Authors.
//
// A split -> Replicate: one all-gather-v of every member's piece along the
// split dim. Covers Shard, StridedShard, Ragged (rows) and any user
// placement that splits one dim. Pieces that are consecutive blocks land in
// place; pieces made of equal runs, one per block of the dim (StridedShard),
// land in place too, gathered along a [blocks, ...] view of the dim; any
// other order (user placements) costs one reorder after the gather.
#include <ATen/ATen.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/redistribute/index_exchange.h>
#include <dtensor/redistribute/transition.h>
#include "absl/container/flat_hash_map.h"

namespace dtensor {
namespace {

using redistribute_internal::interleaved_block_count;
using redistribute_internal::merged_lists;
using redistribute_internal::split_into_blocks;

// The local dim the source placement splits (rows for a Ragged), or -1.
int64_t gathered_dim(const StepContext& step) {
  return local_split_dim(step.source_placement(), step.source_merged());
}

// What a gather derives from its step alone.
struct Gather {
  int64_t dim = 0;                    // of the local tensor
  int64_t blocks = 1;                 // `dim` gathered as [blocks, rest]
  std::vector<int64_t> sizes;         // each member's extent along `dim` per block
  std::vector<int64_t> output_shape;  // every piece gathered, `dim` cut into blocks if > 1
  at::Tensor reorder;  // per target index, where the gather put it; undefined when in order
};

// `gathered` with the slices of `dim` in `order`: index_select into a pooled
// tensor.
at::Tensor select_rows(const at::Tensor& gathered, int64_t dim, const at::Tensor& order) {
  std::vector<int64_t> shape = gathered.sizes().vec();
  shape[dim] = order.numel();
  at::Tensor selected = pooled_empty(shape, gathered.options());
  at::index_select_out(selected, gathered, dim, order);
  return selected;
}

// For each target index, where the gather put it.
at::Tensor reorder(const std::vector<int64_t>& gathered, const std::vector<int64_t>& target,
                   c10::Device device) {
  absl::flat_hash_map<int64_t, int64_t> position;
  for (size_t i = 0; i < gathered.size(); ++i) position.emplace(gathered[i], i);
  std::vector<int64_t> order;
  order.reserve(target.size());
  for (int64_t index : target) order.push_back(position.at(index));
  return at::tensor(order, at::kLong).to(device);
}

Gather make_gather(const StepContext& step) {
  Gather gather;
  gather.dim = gathered_dim(step);
  std::vector<std::vector<int64_t>> pieces;
  for (int64_t p = 0; p < step.group_size(); ++p) {
    pieces.push_back(step.source_layout(p).global_indices()[gather.dim]);
  }
  const auto target =
      merged_lists(step.my_target_layout(), step.target().shape(), step.source_merged());
  for (const std::vector<int64_t>& list : target) {
    gather.output_shape.push_back(static_cast<int64_t>(list.size()));
  }
  const std::vector<int64_t>& wanted = target[gather.dim];
  if (const auto blocks = interleaved_block_count(pieces, wanted)) {
    gather.blocks = *blocks;
  } else {
    std::vector<int64_t> gathered_order;
    for (const std::vector<int64_t>& piece : pieces) {
      gathered_order.insert(gathered_order.end(), piece.begin(), piece.end());
    }
    gather.reorder = reorder(gathered_order, wanted, step.communicator()->device());
  }
  for (const std::vector<int64_t>& piece : pieces) {
    gather.sizes.push_back(static_cast<int64_t>(piece.size()) / gather.blocks);
  }
  gather.output_shape = split_into_blocks(gather.output_shape, gather.dim, gather.blocks);
  return gather;
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
    const Gather& gather = step.derived<Gather>([&] { return make_gather(step); });
    // The collective reads a contiguous buffer (a view's shard may be strided).
    const at::Tensor input = pooled_contiguous(local);
    at::Tensor output = pooled_empty(gather.output_shape, local.options());
    if (gather.blocks == 1) {
      step.communicator()->all_gather_v(input, output, gather.sizes, gather.dim);
    } else {
      const at::Tensor blocked =
          input.view(split_into_blocks(input.sizes().vec(), gather.dim, gather.blocks));
      step.communicator()->all_gather_v(blocked, output, gather.sizes, gather.dim + 1);
    }
    if (gather.reorder.defined()) output = select_rows(output, gather.dim, gather.reorder);
    const std::vector<int64_t>& shape = step.my_target_layout().local_shape;
    // Skipped when it would be a no-op view: small redistributes are all fixed cost.
    return output.sizes() == shape ? output : output.reshape(shape);
  }
};

}  // namespace

DTENSOR_REGISTER(gather_to_replicate) {
  transitions().add("*->R", std::make_shared<GatherToReplicate>());
}

}  // namespace dtensor
