// Copyright 2026 The dtensor Authors.
//
// mesh/collective_costs.h (<dtensor/mesh/collective_costs.h>): the constants
// a backend gives the cost model (rules/cost.h).
#pragma once

namespace dtensor {

// What the cost model assumes a backend's collectives cost: a
// fixed latency per call plus the bytes a rank sends over a bandwidth. The
// numbers only rank candidate plans (fewer collectives against fewer bytes);
// they do not predict times. Each backend gives its own, from the
// measurements in benchmarks/RESULTS.md (its history before 390419a).
struct CollectiveCosts {
  double latency_us = 20.0;
  double bytes_per_us = 10000.0;
  // An all-to-all costs more per byte than a gather of the same bytes.
  double all_to_all_factor = 1.5;
  // A step that copies locally, without communicating.
  double local_step_us = 0.5;
};

}  // namespace dtensor
