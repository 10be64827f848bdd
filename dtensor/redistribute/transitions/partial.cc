// Copyright 2026 The dtensor Authors.
//
// Transitions out of and into Partial on one mesh dim:
//  * Partial -> Replicate: one all-reduce.
//  * Partial -> a split of one dim whose pieces are consecutive blocks in
//    group order (Shard, Ragged) or equal runs, one per block of the dim
//    (StridedShard: the rank's part of each chunk): one reduce-scatter-v,
//    never an all-reduce. Other splits take Partial -> Replicate -> split.
//  * Replicate -> Partial (internal path only): no communication; exact,
//    because every rank but coordinate 0 holds the op's identity (0 for sum
//    and bxor, 1 for product) and idempotent ops (avg, max, min, band, bor)
//    keep the value everywhere.
#include <numeric>
#include <optional>

#include <ATen/ATen.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/redistribute/index_exchange.h>
#include <dtensor/redistribute/transition.h>
#include "absl/container/flat_hash_map.h"

namespace dtensor {
namespace {

using redistribute_internal::interleaved_block_count;
using redistribute_internal::merged_lists;
using redistribute_internal::split_into_blocks;

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

  // Out of place: the source keeps its values without a copy being made
  // (unless it is strided: the collective reads a contiguous buffer).
  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    at::Tensor result = pooled_empty(local.sizes(), local.options());
    step.communicator()->all_reduce(pooled_contiguous(local), result,
                                    *step.source_placement().partial_op());
    return result;
  }

  // In place: the raw collective's cost, no output to allocate.
  at::Tensor run_consuming(at::Tensor local, const StepContext& step) const override {
    if (!local.is_contiguous()) return run(local, step);
    step.communicator()->all_reduce(local, *step.source_placement().partial_op());
    return local;
  }
};

// The local dim the target splits (rows for a Ragged), or -1.
int64_t scattered_dim(const StepContext& step) {
  return local_split_dim(step.target_placement(), step.target_merged());
}

// How many blocks the group's pieces of `dim` interleave in (index_exchange.h):
// each member's target indices, as positions in the source's list (which
// every member shares: the step's mesh dims are Partial), cut into that
// many equal runs, fill the list in order. A placement that claims ordered
// blocks (Shard, Ragged) is taken at its word: its lists may be long.
std::optional<int64_t> scatter_block_count(const StepContext& step, int64_t dim) {
  if (step.target_placement().splits_into_ordered_blocks()) return 1;
  const std::vector<int64_t> source =
      merged_lists(step.my_source_layout(), step.source().shape(), step.target_merged())[dim];
  absl::flat_hash_map<int64_t, int64_t> position;
  for (size_t i = 0; i < source.size(); ++i) position.emplace(source[i], i);
  std::vector<std::vector<int64_t>> pieces(step.group_size());
  for (int64_t p = 0; p < step.group_size(); ++p) {
    for (int64_t index : step.target_layout(p).global_indices()[dim]) {
      const auto it = position.find(index);
      if (it == position.end()) return std::nullopt;
      pieces[p].push_back(it->second);
    }
  }
  std::vector<int64_t> in_order(source.size());
  std::iota(in_order.begin(), in_order.end(), 0);
  return interleaved_block_count(pieces, in_order);
}

// Whether every group of the step (not only the calling rank's: plans are
// made once for all ranks) reduce-scatters without reordering.
bool every_group_scatters_in_blocks(const StepContext& step, int64_t dim) {
  // Whatever the group (scatter_block_count).
  if (step.target_placement().splits_into_ordered_blocks()) return true;
  std::vector<int64_t> groups = step.source().mesh().shape();
  for (int64_t m : step.mesh_dims()) groups[m] = 1;
  bool all = true;
  for_each_grid_coordinate(groups, [&](const std::vector<int64_t>& coordinate) {
    const StepContext group(step.source(), step.target(), step.mesh_dims(), coordinate);
    all = all && scatter_block_count(group, dim).has_value();
  });
  return all;
}

// What a reduce-scatter derives from its step alone.
struct Scatter {
  int64_t cut_dim = 0;  // the merged local tensor's dim the target splits
  int64_t blocks = 1;   // cut_dim is scattered as [blocks, rest]
  int64_t dim = 0;      // the dim the collective scatters: cut_dim, or cut_dim + 1 when blocked
  std::vector<int64_t> rows;          // each member's run along `dim`
  std::vector<int64_t> output_shape;  // this rank's runs, `dim` moved first
};

Scatter make_scatter(const StepContext& step, const at::Tensor& merged_local) {
  Scatter scatter;
  const int64_t dim = scattered_dim(step);
  scatter.cut_dim = dim;
  const std::optional<int64_t> blocks = scatter_block_count(step, dim);
  DTENSOR_CHECK(blocks.has_value(),
                "redistribute: internal: ", placements_to_string(step.target().placements()),
                " was planned as a reduce-scatter but its pieces are not in blocks");
  scatter.blocks = *blocks;
  scatter.dim = scatter.blocks > 1 ? dim + 1 : dim;
  for (int64_t p = 0; p < step.group_size(); ++p) {
    const auto held = static_cast<int64_t>(step.target_layout(p).global_indices()[dim].size());
    scatter.rows.push_back(held / scatter.blocks);
  }
  // The blocked local tensor's shape with `scatter.dim` moved first, then cut.
  std::vector<int64_t> shape = split_into_blocks(merged_local.sizes().vec(), dim, scatter.blocks);
  shape.erase(shape.begin() + scatter.dim);
  shape.insert(shape.begin(), scatter.rows[step.group_rank()]);
  scatter.output_shape = std::move(shape);
  return scatter;
}

class PartialToBlocks final : public Transition {
 public:
  std::string_view collective() const override { return "reduce_scatter_v"; }

  bool applies(const StepContext& step) const override {
    if (!step.source_placement().is_partial() || step.target_placement().is_partial() ||
        step.target_placement().is_replicate()) {
      return false;
    }
    const int64_t dim = scattered_dim(step);
    return dim >= 0 && every_group_scatters_in_blocks(step, dim);
  }

  int64_t bytes(const StepContext& step) const override {
    const int64_t n = step.group_size();
    return (n - 1) * step.my_source_layout().local_numel() * step.element_size() / n;
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    const LocalLayout& target = step.my_target_layout();
    // The target's merged leading dims as rows; they are whole on every rank,
    // so flattening is all it takes (no index lists on this per-call path).
    const int64_t held_merged = step.my_source_layout().merged_leading_dims;
    const at::Tensor merged = target.merged_leading_dims > held_merged
                                  ? local.flatten(0, target.merged_leading_dims - held_merged)
                                  : local;
    const Scatter& scatter = step.derived<Scatter>([&] { return make_scatter(step, merged); });
    const at::Tensor blocked = scatter.blocks == 1
                                   ? merged
                                   : merged.reshape(split_into_blocks(
                                         merged.sizes().vec(), scatter.cut_dim, scatter.blocks));
    const at::Tensor input =
        pooled_contiguous(scatter.dim == 0 ? blocked : blocked.movedim(scatter.dim, 0));
    at::Tensor output = pooled_empty(scatter.output_shape, local.options());
    step.communicator()->reduce_scatter_v(input, output, scatter.rows,
                                          *step.source_placement().partial_op());
    if (scatter.dim == 0 && output.sizes() == target.local_shape) return output;
    return pooled_contiguous(output.movedim(0, scatter.dim)).reshape(target.local_shape);
  }
};

class ReplicateToPartial final : public Transition {
 public:
  std::string_view collective() const override { return "local"; }
  // From placements that replicate only (applies()).
  bool may_change_non_replicated_locally() const override { return false; }

  bool applies(const StepContext& step) const override {
    return step.source_placement().is_replicate() && step.target_placement().is_partial();
  }

  int64_t bytes(const StepContext& step) const override {
    return step.my_source_layout().local_numel() * step.element_size();
  }

  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    if (const std::optional<int> identity = identity_held(step)) {
      return pooled_empty(local.sizes(), local.options()).fill_(*identity);
    }
    return pooled_clone(local);
  }

  at::Tensor run_consuming(at::Tensor local, const StepContext& step) const override {
    if (!local.is_contiguous()) return run(local, step);
    if (const std::optional<int> identity = identity_held(step)) local.fill_(*identity);
    return local;
  }

 private:
  // What the calling rank holds instead of the value, if anything: the
  // target op's identity, except on coordinate 0 and for idempotent ops.
  static std::optional<int> identity_held(const StepContext& step) {
    if (step.group_rank() == 0) return std::nullopt;
    switch (*step.target_placement().partial_op()) {
      case ReduceOp::kSum:
      case ReduceOp::kBxor:
        return 0;
      case ReduceOp::kProduct:
        return 1;
      default:
        return std::nullopt;
    }
  }
};

}  // namespace

DTENSOR_REGISTER(partial_transitions) {
  transitions().add("*->R", std::make_shared<PartialToReplicate>());
  transitions().add("*->*", std::make_shared<PartialToBlocks>());
  transitions().add("R->*", std::make_shared<ReplicateToPartial>());
}

}  // namespace dtensor
