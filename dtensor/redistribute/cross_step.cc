// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/cross_step.h>

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include <dtensor/mesh/device_mesh.h>
#include "absl/container/flat_hash_set.h"

namespace dtensor::redistribute_internal {
namespace {

RangeList runs_of(const std::vector<int64_t>& list) {
  std::vector<int64_t> sorted;
  const std::vector<int64_t>* ordered = &list;
  if (!std::is_sorted(list.begin(), list.end())) {
    sorted = list;
    std::sort(sorted.begin(), sorted.end());
    ordered = &sorted;
  }
  RangeList runs;
  for (int64_t index : *ordered) append_run(runs, index, index + 1);
  return runs;
}

// Whether some index lies in each of `a`, `b` and `c`.
bool share_an_index(const RangeList& a, const RangeList& b, const RangeList& c) {
  for (size_t i = 0, j = 0, k = 0; i < a.size() && j < b.size() && k < c.size();) {
    const int64_t begin = std::max({a[i].begin, b[j].begin, c[k].begin});
    const int64_t end = std::min({a[i].end, b[j].end, c[k].end});
    if (begin < end) return true;
    // The run that ends first meets nothing further in the others.
    if (a[i].end == end) {
      ++i;
    } else if (b[j].end == end) {
      ++j;
    } else {
      ++k;
    }
  }
  return false;
}

// The union of two runs lists.
RangeList unite(const RangeList& a, const RangeList& b) {
  RangeList all(a);
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end(),
            [](const ChunkRange& x, const ChunkRange& y) { return x.begin < y.begin; });
  RangeList merged;
  for (const ChunkRange& run : all) {
    if (!merged.empty() && run.begin <= merged.back().end) {
      merged.back().end = std::max(merged.back().end, run.end);
    } else {
      merged.push_back(run);
    }
  }
  return merged;
}

// How many indices `a` and `b` share.
int64_t overlap(const RangeList& a, const RangeList& b) {
  int64_t n = 0;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    n += std::max<int64_t>(0, std::min(a[i].end, b[j].end) - std::max(a[i].begin, b[j].begin));
    (a[i].end < b[j].end ? i : j)++;
  }
  return n;
}

// The box of a layout that holds no runs of its own (of Ragged or a user
// placement).
std::optional<Box> box_of_lists(const LocalLayout& layout) {
  if (layout.merged_leading_dims > 1) return std::nullopt;
  Box box;
  box.reserve(layout.local_shape.size());
  for (const std::vector<int64_t>& list : layout.global_indices()) box.push_back(runs_of(list));
  return box;
}

// How many elements `box` holds.
int64_t elements(const Box& box) {
  int64_t n = 1;
  for (const RangeList& runs : box) n *= count_held(runs);
  return n;
}

// How many elements `a` and `b` share.
int64_t overlap(const Box& a, const Box& b) {
  int64_t n = 1;
  for (size_t d = 0; d < a.size() && n > 0; ++d) n *= overlap(a[d], b[d]);
  return n;
}

// Whether no two of the pieces of `wanted` that `held` hold share an
// element: the pieces of two boxes are disjoint when, along some dim, no
// index lies in both boxes and in `wanted`.
bool pieces_disjoint(const std::vector<const Box*>& held, const Box& wanted) {
  for (size_t p = 0; p < held.size(); ++p) {
    for (size_t q = p + 1; q < held.size(); ++q) {
      bool disjoint = false;
      for (size_t d = 0; d < wanted.size() && !disjoint; ++d) {
        disjoint = !share_an_index((*held[p])[d], (*held[q])[d], wanted[d]);
      }
      if (!disjoint) return false;
    }
  }
  return true;
}

// Whether `a` and `b` (per tensor dim: runs or index lists) agree on every
// dim but `dim`.
template <typename PerDim>
bool equal_but(const PerDim& a, const PerDim& b, int64_t dim) {
  if (a.size() != b.size()) return false;
  for (size_t d = 0; d < a.size(); ++d) {
    if (static_cast<int64_t>(d) != dim && a[d] != b[d]) return false;
  }
  return true;
}

// The groups of mesh dims [first, last] on a row-major mesh: the members of
// a group lie `inner` apart from its first (lowest) one, its leader.
struct GroupStrides {
  GroupStrides(const std::vector<int64_t>& mesh_shape, int64_t first, int64_t last) {
    for (size_t m = last + 1; m < mesh_shape.size(); ++m) inner *= mesh_shape[m];
    for (int64_t m = first; m <= last; ++m) size *= mesh_shape[m];
  }
  int64_t leader_of(int64_t rank) const { return rank - rank / inner % size * inner; }
  // Past the group's last member.
  int64_t end_of(int64_t leader) const { return leader + size * inner; }

  int64_t inner = 1;
  int64_t size = 1;
};

}  // namespace

RankLayouts::RankLayouts(DTensorSpecPtr spec)
    : spec_(std::move(spec)), held_(spec_->mesh().size()) {
  const std::vector<int64_t>& mesh_shape = spec_->mesh().shape();
  const std::vector<PlacementPtr>& placements = spec_->placements();
  sharer_.resize(spec_->mesh().size());
  std::iota(sharer_.begin(), sharer_.end(), 0);
  // Row-major: coordinate m of a rank is rank / stride % extent.
  int64_t stride = 1;
  for (auto m = static_cast<int64_t>(placements.size()) - 1; m >= 0; --m) {
    if (placements[m]->is_replicate() || placements[m]->is_partial()) {
      for (int64_t& rank : sharer_) rank -= rank / stride % mesh_shape[m] * stride;
    }
    stride *= mesh_shape[m];
  }
  if (spec_->mesh().contains_calling_rank()) {
    calling_sharer_ = sharer_[grid_position(spec_->mesh().coordinate(), mesh_shape)];
  }
}

const LocalLayout& RankLayouts::layout(int64_t rank) const {
  // The spec made the calling rank's already.
  if (sharer_[rank] == calling_sharer_) return spec_->local_layout();
  if (layouts_.empty()) layouts_.resize(held_.size());
  std::optional<LocalLayout>& layout = layouts_[sharer_[rank]];
  if (!layout) layout = spec_->layout_at(grid_coordinate(sharer_[rank], spec_->mesh().shape()));
  return *layout;
}

const RankLayouts::Held& RankLayouts::held(int64_t rank) const {
  std::optional<Held>& held = held_[sharer_[rank]];
  if (held) return *held;
  held.emplace();
  std::optional<Box> runs;
  if (sharer_[rank] == calling_sharer_) {
    if (const Box* own = spec_->local_layout().runs()) runs = *own;
  } else {
    runs = compute_normalized_held_runs(spec_->shape(), spec_->mesh().shape(),
                                        grid_coordinate(sharer_[rank], spec_->mesh().shape()),
                                        spec_->placements());
  }
  if (runs) {
    held->box = std::move(runs);
  } else {
    held->box = box_of_lists(layout(rank));
    held->from_lists = true;
  }
  return *held;
}

const Box* RankLayouts::box(int64_t rank) const {
  const std::optional<Box>& box = held(rank).box;
  return box ? &*box : nullptr;
}

bool RankLayouts::holds_alike_but(const RankLayouts& other, int64_t rank, int64_t dim) const {
  const Held& mine = held(rank);
  const Held& theirs = other.held(rank);
  // Runs keep the lists' order (rising); a box made of lists does not.
  if (!mine.from_lists && !theirs.from_lists) return equal_but(*mine.box, *theirs.box, dim);
  return equal_but(layout(rank).global_indices(), other.layout(rank).global_indices(), dim);
}

std::optional<GroupExchange> exact_group_exchange(const RankLayouts& from, const RankLayouts& to,
                                                  int64_t first, int64_t last) {
  const GroupStrides group(from.spec().mesh().shape(), first, last);
  const int64_t ranks = from.spec().mesh().size();
  GroupExchange exchange;
  std::vector<int64_t> sent(ranks, 0), sent_to(ranks, 0);
  std::vector<const Box*> holders;  // per rank: the members holding some of what it wants
  // The groups and wanted layouts (by sharer) found covered exactly: ranks
  // of one group that want alike get one verdict, since the check of
  // disjoint pieces costs the square of the holders (all ranks gathering
  // everything over the whole mesh want alike).
  absl::flat_hash_set<std::pair<int64_t, int64_t>> exact;
  for (int64_t rank = 0; rank < ranks; ++rank) {
    const Box* wanted = to.box(rank);
    if (wanted == nullptr) return std::nullopt;
    holders.clear();
    int64_t covered = 0, received = 0, peers = 0, own = 0;
    const int64_t leader = group.leader_of(rank);
    for (int64_t member = leader; member < group.end_of(leader); member += group.inner) {
      const Box* held = from.box(member);
      if (held == nullptr) return std::nullopt;
      const int64_t n = overlap(*held, *wanted);
      if (n == 0) continue;
      covered += n;
      if (member == rank) {
        own = n;
      } else {
        received += n;
        ++peers;
        sent[member] += n;
        ++sent_to[member];
      }
      holders.push_back(held);
    }
    const std::pair<int64_t, int64_t> group_and_wanted(leader, to.sharer(rank));
    if (!exact.contains(group_and_wanted)) {
      if (covered != elements(*wanted) || !pieces_disjoint(holders, *wanted)) {
        return std::nullopt;
      }
      exact.insert(group_and_wanted);
    }
    exchange.max_bytes = std::max(exchange.max_bytes, received);
    exchange.max_own_bytes = std::max(exchange.max_own_bytes, own);
    exchange.max_peers = std::max(exchange.max_peers, peers);
  }
  exchange.max_bytes = std::max(exchange.max_bytes, *std::max_element(sent.begin(), sent.end()));
  exchange.max_peers =
      std::max(exchange.max_peers, *std::max_element(sent_to.begin(), sent_to.end()));
  const auto element = static_cast<int64_t>(c10::elementSize(from.spec().dtype()));
  exchange.max_bytes *= element;
  exchange.max_own_bytes *= element;
  exchange.rank0_sent_bytes = sent[0] * element;
  return exchange;
}

bool groups_hold_their_targets(const RankLayouts& from, const RankLayouts& to, int64_t first,
                               int64_t last, int64_t dim) {
  // Group by group, rank 0's first, so that a step most groups refuse
  // costs few layouts.
  const GroupStrides group(from.spec().mesh().shape(), first, last);
  for (int64_t leader = 0; leader < from.spec().mesh().size(); ++leader) {
    if (group.leader_of(leader) != leader) continue;
    RangeList held;  // the indices of `dim` the group holds
    for (int64_t rank = leader; rank < group.end_of(leader); rank += group.inner) {
      const Box* have = from.box(rank);
      if (have == nullptr || to.box(rank) == nullptr) return false;
      if (!from.holds_alike_but(to, rank, dim)) return false;
      held = unite(held, (*have)[dim]);
    }
    for (int64_t rank = leader; rank < group.end_of(leader); rank += group.inner) {
      const RangeList& wanted = (*to.box(rank))[dim];
      if (overlap(wanted, held) != count_held(wanted)) return false;
    }
  }
  return true;
}

}  // namespace dtensor::redistribute_internal
