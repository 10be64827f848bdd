// Copyright 2026 The dtensor Authors.
//
// rules/cost.h: what moving one input on one mesh dim costs, for choosing
// between strategy rows.
//
// An estimate in microseconds with the backend's constants
// (mesh/communicator.h CollectiveCosts): zero when nothing changes, a
// local step for slicing a replicated tensor, a collective's latency plus the
// bytes it moves otherwise. It only has to rank rows sensibly; the planner
// finds the real steps afterwards.
#pragma once

#include <cstdint>

#include "mesh/communicator.h"
#include "placements/placement.h"

namespace dtensor {

// Cost of changing one mesh dim of `n` ranks from `from` to `to` for a tensor
// of `global_bytes`.
double placement_change_cost(const Placement& from, const Placement& to, int64_t global_bytes,
                             int64_t n, const CollectiveCosts& costs);

}  // namespace dtensor
