// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/layout.h>

#include <atomic>
#include <mutex>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include <dtensor/base/check.h>

namespace dtensor {

int64_t local_split_dim(const Placement& p, int64_t merged) {
  const std::optional<int64_t> dim = split_dim_of(p);
  if (!dim) return -1;
  return *dim < merged ? 0 : *dim - merged + 1;
}

std::vector<PlacementPtr> normalize_placements(const std::vector<PlacementPtr>& placements,
                                               int64_t tensor_ndim,
                                               const std::vector<int64_t>& mesh_shape) {
  DTENSOR_CHECK(placements.size() == mesh_shape.size(), "placements: expected one per mesh dim (",
                mesh_shape.size(), "), found ", placements.size());
  std::vector<PlacementPtr> normalized;
  normalized.reserve(placements.size());
  std::optional<int64_t> ragged_dims;
  for (size_t i = 0; i < placements.size(); ++i) {
    DTENSOR_CHECK(placements[i] != nullptr, "placements[", i,
                  "]: expected a placement, found null");
    normalized.push_back(placements[i]->normalized(tensor_ndim));
    normalized.back()->check_mesh_dim_size(mesh_shape[i]);
    const int64_t k = normalized.back()->merged_leading_dims();
    if (k == 0) continue;
    DTENSOR_CHECK(!ragged_dims || k == *ragged_dims, "placements ",
                  placements_to_string(placements),
                  ": expected every Ragged placement to merge the same leading dims, found ",
                  *ragged_dims, " and ", k);
    ragged_dims = k;
  }
  const int64_t merged = ragged_dims.value_or(1);
  for (const PlacementPtr& p : normalized) {
    const std::optional<int64_t> dim = p->split_dim();
    DTENSOR_CHECK(!dim || merged == 1 || *dim >= merged, "placements ",
                  placements_to_string(placements), ": ", p->to_string(), " splits tensor dim ",
                  *dim, ", which a Ragged placement merged into rows; expected a dim >= ", merged);
  }
  return normalized;
}

int64_t LocalLayout::local_numel() const {
  int64_t numel = 1;
  for (int64_t extent : local_shape) numel *= extent;
  return numel;
}

int64_t merged_leading_dims(const std::vector<PlacementPtr>& placements) {
  int64_t merged = 1;
  for (const PlacementPtr& p : placements) merged = std::max(merged, p->merged_leading_dims());
  return merged;
}

namespace {

void check_layout_arguments(const std::vector<int64_t>& global_shape,
                            const std::vector<int64_t>& mesh_shape,
                            const std::vector<int64_t>& coordinate) {
  DTENSOR_CHECK(coordinate.size() == mesh_shape.size(), "layout: coordinate: expected ",
                mesh_shape.size(), " values, found ", coordinate.size());
  for (size_t i = 0; i < mesh_shape.size(); ++i) {
    DTENSOR_CHECK(coordinate[i] >= 0 && coordinate[i] < mesh_shape[i], "layout: coordinate[", i,
                  "]: expected a value in [0, ", mesh_shape[i], "), found ", coordinate[i]);
  }
  for (int64_t extent : global_shape) {
    DTENSOR_CHECK(extent >= 0, "layout: global shape: expected non-negative sizes, found ",
                  c10::IntArrayRef(global_shape));
  }
}

// The index lists, by composing every placement's `restrict`.
LayoutIndices restricted_indices(const std::vector<int64_t>& global_shape,
                                 const std::vector<int64_t>& mesh_shape,
                                 const std::vector<int64_t>& coordinate,
                                 const std::vector<PlacementPtr>& normalized, int64_t merged) {
  LayoutIndices indices(global_shape, merged);
  for (size_t i = 0; i < normalized.size(); ++i) {
    normalized[i]->restrict(indices, mesh_shape[i], coordinate[i]);
  }
  return indices;
}

// The box each dim keeps when every splitting placement holds one block of
// what it splits; nullopt when some placement does not.
std::optional<std::vector<ChunkRange>> block_ranges(const std::vector<int64_t>& global_shape,
                                                    const std::vector<int64_t>& mesh_shape,
                                                    const std::vector<int64_t>& coordinate,
                                                    const std::vector<PlacementPtr>& normalized) {
  std::vector<ChunkRange> ranges;
  ranges.reserve(global_shape.size());
  for (int64_t extent : global_shape) ranges.push_back({0, extent});
  for (size_t i = 0; i < normalized.size(); ++i) {
    const Placement& p = *normalized[i];
    if (p.merged_leading_dims() > 0) return std::nullopt;
    const std::optional<int64_t> dim = p.split_dim();
    if (!dim) continue;
    ChunkRange& range = ranges[*dim];
    const std::optional<ChunkRange> block =
        p.block_of(range.end - range.begin, mesh_shape[i], coordinate[i]);
    if (!block) return std::nullopt;
    range = {range.begin + block->begin, range.begin + block->end};
  }
  return ranges;
}

}  // namespace

struct LocalLayout::IndexLists {
  // Set once `lists` is made. Checked twice around the mutex rather than
  // through a once flag: glibc's std::call_once makes a futex system call on
  // every first call (the planner makes hundreds of layouts per plan), and
  // absl::call_once never returns again after its function throws (a
  // bad_alloc for a long dim), where this leaves the lists unmade for the
  // next call.
  std::atomic<bool> made{false};
  std::mutex mutex;
  std::vector<std::vector<int64_t>> lists;  // made from `blocks` on first use when they are set
  std::optional<std::vector<ChunkRange>> blocks;  // when every dim holds one block
};

const std::vector<std::vector<int64_t>>& LocalLayout::global_indices() const {
  IndexLists& cache = *index_lists;
  if (cache.made.load(std::memory_order_acquire)) return cache.lists;
  const std::lock_guard<std::mutex> lock(cache.mutex);
  if (!cache.made.load(std::memory_order_relaxed)) {
    std::vector<std::vector<int64_t>> lists;
    lists.reserve(cache.blocks->size());
    for (const ChunkRange& r : *cache.blocks) {
      std::vector<int64_t>& list = lists.emplace_back(r.end - r.begin);
      std::iota(list.begin(), list.end(), r.begin);
    }
    cache.lists = std::move(lists);
    cache.made.store(true, std::memory_order_release);
  }
  return cache.lists;
}

const std::vector<ChunkRange>* LocalLayout::blocks() const {
  return index_lists->blocks ? &*index_lists->blocks : nullptr;
}

namespace {

// compute_local_layout once its arguments are checked and normalized.
LocalLayout layout_of(const std::vector<int64_t>& global_shape,
                      const std::vector<int64_t>& mesh_shape,
                      const std::vector<int64_t>& coordinate,
                      const std::vector<PlacementPtr>& normalized) {
  LocalLayout layout;
  layout.merged_leading_dims = merged_leading_dims(normalized);
  layout.index_lists = std::make_shared<LocalLayout::IndexLists>();
  if (auto ranges = block_ranges(global_shape, mesh_shape, coordinate, normalized)) {
    layout.local_shape.reserve(ranges->size());
    layout.global_offset.reserve(ranges->size());
    for (size_t d = 0; d < ranges->size(); ++d) {
      const ChunkRange& r = (*ranges)[d];
      layout.local_shape.push_back(r.end - r.begin);
      layout.global_offset.push_back(r.end > r.begin ? r.begin : global_shape[d]);
    }
    layout.index_lists->blocks = std::move(*ranges);
    return layout;
  }
  LayoutIndices indices = restricted_indices(global_shape, mesh_shape, coordinate, normalized,
                                             layout.merged_leading_dims);
  const std::vector<int64_t> extents =
      LayoutIndices::extents(global_shape, layout.merged_leading_dims);
  layout.local_shape.reserve(indices.lists().size());
  layout.global_offset.reserve(indices.lists().size());
  for (size_t d = 0; d < indices.lists().size(); ++d) {
    const std::vector<int64_t>& held = indices.lists()[d];
    layout.local_shape.push_back(static_cast<int64_t>(held.size()));
    layout.global_offset.push_back(held.empty() ? extents[d] : held.front());
  }
  layout.index_lists->lists = std::move(indices).release_lists();
  layout.index_lists->made.store(true, std::memory_order_release);
  return layout;
}

}  // namespace

LocalLayout compute_local_layout(const std::vector<int64_t>& global_shape,
                                 const std::vector<int64_t>& mesh_shape,
                                 const std::vector<int64_t>& coordinate,
                                 const std::vector<PlacementPtr>& placements) {
  check_layout_arguments(global_shape, mesh_shape, coordinate);
  return layout_of(
      global_shape, mesh_shape, coordinate,
      normalize_placements(placements, static_cast<int64_t>(global_shape.size()), mesh_shape));
}

LocalLayout compute_normalized_local_layout(const std::vector<int64_t>& global_shape,
                                            const std::vector<int64_t>& mesh_shape,
                                            const std::vector<int64_t>& coordinate,
                                            const std::vector<PlacementPtr>& normalized) {
  check_layout_arguments(global_shape, mesh_shape, coordinate);
  return layout_of(global_shape, mesh_shape, coordinate, normalized);
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> compute_local_shape_and_global_offset(
    const std::vector<int64_t>& global_shape, const DeviceMesh& mesh,
    const std::vector<PlacementPtr>& placements) {
  LocalLayout layout =
      compute_local_layout(global_shape, mesh.shape(), mesh.coordinate(), placements);
  return {std::move(layout.local_shape), std::move(layout.global_offset)};
}

}  // namespace dtensor
