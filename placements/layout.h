// Copyright 2026 The dtensor Authors.
//
// placements/layout.h: which part of a global tensor each rank holds.
//
// Composes each mesh dim's `Placement::restrict`, left to right, starting from
// every index of the global tensor, exactly as PyTorch's newest
// compute_local_shape_and_global_offset does. For mesh (4,2), a [15,5] tensor
// and [SS(0,2), S(0)], the ranks hold dim-0 sizes 2,2,2,2,2,2,2,1 at offsets
// 0,8,2,10,4,12,6,14.
//
//   dtensor::LocalLayout layout = dtensor::compute_local_layout(
//       {15, 5}, /*mesh_shape=*/{4, 2}, /*coordinate=*/{1, 1},
//       dtensor::parse_placements("SS(0,2),S(0)"));
//   layout.local_shape;     // {2, 5}
//   layout.global_offset;   // {10, 0}
//   layout.global_indices();  // {{10, 11}, {0, 1, 2, 3, 4}}
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placement.h>

namespace dtensor {

// The dim of a local tensor that `p` splits, in a layout whose leading
// `merged` dims are merged into rows (1: none merged), or -1 when it splits
// none.
int64_t local_split_dim(const Placement& p, int64_t merged);

// Checks `placements` for a tensor of `tensor_ndim` dims on a mesh of
// `mesh_shape` and returns them normalized (negative dims resolved). Throws
// dtensor::Error naming the problem: a count other than one per mesh dim, a
// dim out of range, Ragged units of the wrong length, Ragged placements that
// merge different numbers of dims, or a split of a dim merged into rows.
std::vector<PlacementPtr> normalize_placements(const std::vector<PlacementPtr>& placements,
                                               int64_t tensor_ndim,
                                               const std::vector<int64_t>& mesh_shape);

// How many leading dims the (normalized) placements merge into rows: the
// Ragged placements' `dims`, or 1 (nothing merged) when there is none.
int64_t merged_leading_dims(const std::vector<PlacementPtr>& placements);

struct LocalLayout {
  // Shape of the local tensor. Ragged placements that merge k > 1 leading
  // dims give it ndim - k + 1 dims, the first counting flattened rows.
  std::vector<int64_t> local_shape;
  // Per local dim, the first global index held, or the global size of that
  // dim when nothing is held (an empty shard's offset is the dim size).
  std::vector<int64_t> global_offset;
  // The leading dims merged into rows (1: none).
  int64_t merged_leading_dims = 1;

  // Elements of the local tensor.
  int64_t local_numel() const;
  // Per local dim, every global index held, in local order. Made on first
  // use and kept: a layout of placements that say which positions they hold
  // (Placement::held_pieces) is known as runs, and most callers never need
  // the lists (which cost one integer per index of the dim).
  const std::vector<std::vector<int64_t>>& global_indices() const;
  // Per local dim, the global indices held as runs (touching ones merged),
  // in local order, when every placement says which positions it holds
  // (Shard, StridedShard, Replicate, Partial); nullptr otherwise. Answers
  // what global_indices() would, without the lists.
  const std::vector<RangeList>* runs() const;

  struct IndexLists;
  std::shared_ptr<IndexLists> index_lists;
};

// The layout of the rank at `coordinate` of a mesh of `mesh_shape`.
LocalLayout compute_local_layout(const std::vector<int64_t>& global_shape,
                                 const std::vector<int64_t>& mesh_shape,
                                 const std::vector<int64_t>& coordinate,
                                 const std::vector<PlacementPtr>& placements);

// The same for placements that normalize_placements returned (a spec's),
// which it does not normalize again.
LocalLayout compute_normalized_local_layout(const std::vector<int64_t>& global_shape,
                                            const std::vector<int64_t>& mesh_shape,
                                            const std::vector<int64_t>& coordinate,
                                            const std::vector<PlacementPtr>& normalized);

// What the rank at `coordinate` holds of each dim as runs of global
// indices (LocalLayout::runs) for placements that normalize_placements
// returned, without the rest of a layout; nullopt when some placement does
// not say which positions it holds (Ragged, a user's without held_pieces).
std::optional<std::vector<RangeList>> compute_normalized_held_runs(
    const std::vector<int64_t>& global_shape, const std::vector<int64_t>& mesh_shape,
    const std::vector<int64_t>& coordinate, const std::vector<PlacementPtr>& normalized);

// What `p` (normalized) says coordinate `r` of a mesh dim of `n` ranks holds
// of `length` positions of its split dim, in a tensor of `ndim` dims
// (Placement::held_pieces), checked as layouts check it: non-empty pieces in
// rising order within [0, length) and, for dims short enough to list, the
// positions `restrict` keeps (once per thread and (placement, length, n,
// r); Shard and StridedShard aside). nullopt when `p` does not say or has no
// split dim. Throws dtensor::Error when a check fails. Layouts read pieces
// through it, and so do rules (the view rules' flat splits, which read every
// rank's: a backstop for specs that never became a DTensor, whose
// construction reads every rank's layout).
std::optional<RangeList> checked_held_pieces(const PlacementPtr& p, size_t ndim, int64_t length,
                                             int64_t n, int64_t r);

// The calling rank's local shape and global offset on `mesh`.
std::pair<std::vector<int64_t>, std::vector<int64_t>> compute_local_shape_and_global_offset(
    const std::vector<int64_t>& global_shape, const DeviceMesh& mesh,
    const std::vector<PlacementPtr>& placements);

}  // namespace dtensor
