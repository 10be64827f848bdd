// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/cross_step.h: what the groups of a run of mesh dims
// hold of what their members need after a step: whether one exchange inside
// them can make a whole redistribute, other mesh dims changing too, and
// whether a step is group-local. Internal to the planner.
//
// [R,S(0)] -> [S(0),R] on a (2,2) mesh is such a step over mesh dim 1: each
// rank needs the rows one member of its mesh-dim-1 group holds, so one
// exchange there replaces a gather (twice the bytes) and a slice.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <dtensor/placements/spec.h>

namespace dtensor::redistribute_internal {

// One runs list per tensor dim (placements/layout.h): a layout's index
// lists as sets.
using Box = std::vector<RangeList>;

// What every rank holds of one spec, as runs per dim, each made on first
// use and kept. The planner asks for the same ranks of the same state at
// many of its steps; a layout costs far more than the lookup. Where every
// placement says which positions it holds (Placement::held_pieces), only
// the runs are made, not whole layouts. Ranks that differ only in
// Replicate and Partial mesh dims (which restrict nothing) share one.
class RankLayouts {
 public:
  explicit RankLayouts(DTensorSpecPtr spec);

  const DTensorSpec& spec() const { return *spec_; }
  // What the rank at flat position `rank` of the mesh holds, as runs of
  // global indices per dim (of its index lists, as sets, where a placement
  // gives only lists); nullptr when the layout merges leading dims.
  const Box* box(int64_t rank) const;
  // Whether `rank` holds the same indices, in the same local order, here as
  // in `other` along every tensor dim but `dim`.
  bool holds_alike_but(const RankLayouts& other, int64_t rank, int64_t dim) const;
  // The rank whose layout `rank` shares: ranks of one sharer hold alike.
  int64_t sharer(int64_t rank) const { return sharer_[rank]; }

 private:
  struct Held {
    std::optional<Box> box;   // always set unless from_lists (nullopt: merged rows)
    bool from_lists = false;  // the box is a set: the lists' order is the layout's
  };
  const Held& held(int64_t rank) const;
  const LocalLayout& layout(int64_t rank) const;

  DTensorSpecPtr spec_;
  std::vector<int64_t> sharer_;  // by rank: the rank whose layout it shares
  int64_t calling_sharer_ = -1;  // the calling rank's sharer, when it is in the mesh
  mutable std::vector<std::optional<Held>> held_;  // by sharer
  // By sharer, for placements that give only index lists; sized on first use.
  mutable std::vector<std::optional<LocalLayout>> layouts_;
};

// What the exchange moves, at the busiest rank.
struct GroupExchange {
  int64_t max_bytes = 0;         // sent to, or received from, other members
  int64_t max_peers = 0;         // other members a rank sends to or receives from
  int64_t max_own_bytes = 0;     // a rank keeps (copies into its result)
  int64_t rank0_sent_bytes = 0;  // what rank 0 sends (PlannedStep::bytes)
};

// The exchange that takes every rank from `from` to `to` inside its group of
// mesh dims [first, last], when each rank's group holds each element the
// rank needs exactly once; nullopt otherwise (or when a layout merges
// leading dims into rows). Looks at every rank, rank 0 first (where most
// candidates fail), so every rank decides alike. Index lists are handled as
// sorted runs, so a pair of ranks costs O(runs): O(1) for Shard and
// Replicate, the split factor for StridedShard.
std::optional<GroupExchange> exact_group_exchange(const RankLayouts& from, const RankLayouts& to,
                                                  int64_t first, int64_t last);

// The exact form of the planner's structural group-locality rule for a step
// on mesh dims [first, last] that touches tensor dim `dim` alone: in every
// group, each member's target indices of `dim` are among those the group
// holds before the step, and its other dims do not change. It admits what
// the structural rule refuses but stays inside the group, such as FSDP's
// [SS(d, k), S(d)] -> [R, S(d)] (k the later splitter's size: each dp group
// holds one tp piece). Checks every group, so the plan stays the same
// whichever rank makes it; false when a layout merges leading dims.
bool groups_hold_their_targets(const RankLayouts& from, const RankLayouts& to, int64_t first,
                               int64_t last, int64_t dim);

}  // namespace dtensor::redistribute_internal
