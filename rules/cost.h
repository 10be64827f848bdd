// Copyright 2026 The dtensor Authors.
//
// rules/cost.h (<dtensor/rules/cost.h>): the one cost model, used by
// propagation to rank strategy rows and by the redistribute planner to rank
// plans.
//
// An estimate in microseconds from a backend's constants
// (mesh/collective_costs.h, `DeviceMesh::collective_costs()`): a local copy
// costs a fixed step plus its bytes at ten times the network's bandwidth; a
// collective costs its latency plus the bytes the busiest rank sends, an
// all-to-all with several peers weighted by `all_to_all_factor`. The
// planner prices each step from what its transition says it sends;
// propagation, which decides before any plan exists, prices a change of one
// mesh dim by the collective the planner would use for it, counting bytes
// the way the transitions count them. The numbers only rank candidates; they
// do not predict times.
#pragma once

#include <cstdint>

#include <dtensor/mesh/collective_costs.h>
#include <dtensor/placements/placement.h>

namespace dtensor {

enum class StepKind {
  kLocalCopy,   // no communication (a slice, a Partial term, a one-rank group)
  kCollective,  // a gather, a reduction, a scatter
  kAllToAll,    // ranks exchange distinct pieces
};

// One step in which the busiest rank sends (or, for a local copy, copies)
// `bytes`, to `peers` other ranks.
double step_cost(StepKind kind, int64_t bytes, int64_t peers, const CollectiveCosts& costs);

// Changing one mesh dim of `n` ranks from `from` to `to`, for a tensor whose
// piece in that mesh dim's group has `piece_bytes`.
double placement_change_cost(const Placement& from, const Placement& to, int64_t piece_bytes,
                             int64_t n, const CollectiveCosts& costs);

}  // namespace dtensor
