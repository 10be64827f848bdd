// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/layout.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/placements/shard.h>
#include <dtensor/placements/strided_shard.h>
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

// Of the indices `runs` hold, in order, those at the positions `pieces`
// name (pieces checked_held_pieces returned).
RangeList indices_at(const RangeList& runs, const RangeList& pieces) {
  RangeList kept;
  size_t run = 0;
  int64_t run_start = 0;  // the position of runs[run].begin
  for (const ChunkRange& piece : pieces) {
    // Sums are grouped so that none passes the number of positions `runs`
    // hold (near INT64_MAX).
    for (int64_t position = piece.begin; position < piece.end;) {
      while (position - run_start >= runs[run].end - runs[run].begin) {
        run_start += runs[run].end - runs[run].begin;
        ++run;
      }
      const int64_t run_end = run_start + (runs[run].end - runs[run].begin);  // as a position
      const int64_t taken = std::min(piece.end, run_end);
      const int64_t begin = runs[run].begin + (position - run_start);
      append_run(kept, begin, begin + (taken - position));
      position = taken;
    }
  }
  return kept;
}

std::string describe_ranges(const RangeList& ranges) {
  return absl::StrJoin(ranges, ", ", [](std::string* out, const ChunkRange& range) {
    absl::StrAppend(out, "[", range.begin, ", ", range.end, ")");
  });
}

// The positions `p`'s restrict keeps of `length` along its split dim `dim`
// of a tensor of `ndim` dims, for coordinate `r` of `n`, as ranges. The
// indices it is given (1, 3, 5, ...) differ from their positions, so that a
// restrict keeping by index value, which held_pieces cannot describe, shows.
RangeList positions_restrict_keeps(const Placement& p, size_t ndim, int64_t dim, int64_t length,
                                   int64_t n, int64_t r) {
  std::vector<int64_t> shape(ndim, 1);
  shape[dim] = length;
  LayoutIndices indices(shape, 1);
  std::vector<int64_t>& along = indices.along(dim);
  for (int64_t& index : along) index = 2 * index + 1;
  p.restrict(indices, n, r);
  RangeList kept;
  for (int64_t index : indices.along(dim)) {
    const int64_t position = (index - 1) / 2;
    DTENSOR_CHECK(kept.empty() || position >= kept.back().end, p.to_string(),
                  ": restrict: expected the positions it keeps in rising order, found ", position,
                  " after ", kept.back().end - 1);
    append_run(kept, position, position + 1);
  }
  return kept;
}

// A call to held_pieces whose answer was found to match restrict's. Keys
// compare placements by equals(), which covers their parameters (hash()
// alone may collide).
struct CheckedPieces {
  PlacementPtr placement;
  int64_t length, n, r;
  friend bool operator==(const CheckedPieces& a, const CheckedPieces& b) {
    return a.length == b.length && a.n == b.n && a.r == b.r && *a.placement == *b.placement;
  }
  template <typename H>
  friend H AbslHashValue(H h, const CheckedPieces& c) {
    return H::combine(std::move(h), c.placement->hash(), c.length, c.n, c.r);
  }
};

// A user placement gives two answers to what a rank holds: the pieces
// held_pieces names (read for layouts of runs and by the view rules'
// flat splits, rules/dim_map.cc) and what restrict keeps (read where index
// lists are made, e.g. beside a Ragged placement). Were they to differ, one
// tensor would be laid out two ways: a silent wrong result. So the first
// time a thread meets each (placement, length, n, r), for a dim short
// enough to list, the two are compared; a bounded set of the checked calls
// keeps every later layout at one lookup. Shard and StridedShard are
// exempt: tests check them against torch.chunk, and the planner makes
// thousands of their layouts.
void check_pieces_match_restrict(const PlacementPtr& p, size_t ndim, int64_t dim, int64_t length,
                                 int64_t n, int64_t r, const RangeList& pieces) {
  constexpr int64_t kLongestChecked = 1 << 16;
  constexpr size_t kMostRemembered = 1 << 14;
  if (length > kLongestChecked || exactly<Shard>(*p) != nullptr ||
      exactly<StridedShard>(*p) != nullptr) {
    return;
  }
  thread_local absl::flat_hash_set<CheckedPieces> checked;
  CheckedPieces call{p, length, n, r};
  if (checked.contains(call)) return;
  const RangeList kept = positions_restrict_keeps(*p, ndim, dim, length, n, r);
  RangeList merged;  // touching pieces may come unmerged
  for (const ChunkRange& piece : pieces) append_run(merged, piece.begin, piece.end);
  DTENSOR_CHECK(kept == merged, p->to_string(), ": held_pieces and restrict disagree on what rank ",
                r, " of ", n, " holds of ", length, " positions: expected held_pieces to give ",
                "what restrict keeps, ", describe_ranges(kept), "; found ",
                describe_ranges(pieces));
  if (checked.size() >= kMostRemembered) checked.clear();
  checked.insert(std::move(call));
}

// The runs each dim keeps when every splitting placement says which
// positions it holds; nullopt when some placement does not.
std::optional<std::vector<RangeList>> held_runs(const std::vector<int64_t>& global_shape,
                                                const std::vector<int64_t>& mesh_shape,
                                                const std::vector<int64_t>& coordinate,
                                                const std::vector<PlacementPtr>& normalized) {
  std::vector<RangeList> runs;
  runs.reserve(global_shape.size());
  for (int64_t extent : global_shape) {
    runs.push_back(extent > 0 ? RangeList{{0, extent}} : RangeList{});
  }
  for (size_t i = 0; i < normalized.size(); ++i) {
    const Placement& p = *normalized[i];
    if (p.merged_leading_dims() > 0) return std::nullopt;
    const std::optional<int64_t> dim = p.split_dim();
    if (!dim) {
      // A user placement may narrow without naming a split dim.
      if (p.is_replicate() || p.is_partial()) continue;
      return std::nullopt;
    }
    RangeList& held = runs[*dim];
    const std::optional<RangeList> pieces = checked_held_pieces(
        normalized[i], global_shape.size(), count_held(held), mesh_shape[i], coordinate[i]);
    if (!pieces) return std::nullopt;
    held = indices_at(held, *pieces);
  }
  return runs;
}

}  // namespace

std::optional<RangeList> checked_held_pieces(const PlacementPtr& p, size_t ndim, int64_t length,
                                             int64_t n, int64_t r) {
  const std::optional<int64_t> dim = p->split_dim();
  if (!dim) return std::nullopt;
  std::optional<RangeList> pieces = p->held_pieces(length, n, r);
  if (!pieces) return std::nullopt;
  int64_t previous_end = 0;
  for (const ChunkRange& piece : *pieces) {
    DTENSOR_CHECK(previous_end <= piece.begin && piece.begin < piece.end && piece.end <= length,
                  p->to_string(),
                  ": held_pieces: expected non-empty pieces in rising order within [0, ", length,
                  "), found [", piece.begin, ", ", piece.end, ")");
    previous_end = piece.end;
  }
  check_pieces_match_restrict(p, ndim, *dim, length, n, r, *pieces);
  return pieces;
}

struct LocalLayout::IndexLists {
  // Set once `lists` is made. Checked twice around the mutex rather than
  // through a once flag: glibc's std::call_once makes a futex system call on
  // every first call (the planner makes hundreds of layouts per plan), and
  // absl::call_once never returns again after its function throws (a
  // bad_alloc for a long dim), where this leaves the lists unmade for the
  // next call.
  std::atomic<bool> made{false};
  std::mutex mutex;
  std::vector<std::vector<int64_t>> lists;  // made from `runs` on first use when they are set
  std::optional<std::vector<RangeList>> runs;
};

const std::vector<std::vector<int64_t>>& LocalLayout::global_indices() const {
  IndexLists& cache = *index_lists;
  if (cache.made.load(std::memory_order_acquire)) return cache.lists;
  const std::lock_guard<std::mutex> lock(cache.mutex);
  if (!cache.made.load(std::memory_order_relaxed)) {
    std::vector<std::vector<int64_t>> lists;
    lists.reserve(cache.runs->size());
    for (const RangeList& runs : *cache.runs) {
      std::vector<int64_t>& list = lists.emplace_back(count_held(runs));
      auto next = list.begin();
      for (const ChunkRange& run : runs) {
        std::iota(next, next + (run.end - run.begin), run.begin);
        next += run.end - run.begin;
      }
    }
    cache.lists = std::move(lists);
    cache.made.store(true, std::memory_order_release);
  }
  return cache.lists;
}

const std::vector<RangeList>* LocalLayout::runs() const {
  return index_lists->runs ? &*index_lists->runs : nullptr;
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
  if (auto runs = held_runs(global_shape, mesh_shape, coordinate, normalized)) {
    layout.local_shape.reserve(runs->size());
    layout.global_offset.reserve(runs->size());
    for (size_t d = 0; d < runs->size(); ++d) {
      const RangeList& held = (*runs)[d];
      layout.local_shape.push_back(count_held(held));
      layout.global_offset.push_back(held.empty() ? global_shape[d] : held.front().begin);
    }
    layout.index_lists->runs = std::move(*runs);
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

std::optional<std::vector<RangeList>> compute_normalized_held_runs(
    const std::vector<int64_t>& global_shape, const std::vector<int64_t>& mesh_shape,
    const std::vector<int64_t>& coordinate, const std::vector<PlacementPtr>& normalized) {
  check_layout_arguments(global_shape, mesh_shape, coordinate);
  return held_runs(global_shape, mesh_shape, coordinate, normalized);
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
