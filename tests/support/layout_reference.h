// Copyright 2026 The dtensor Authors.
//
// tests/support/layout_reference.h: what a rank must hold, computed the plain
// way, for tests to compare DTensors against.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placement.h>
#include <dtensor/redistribute/collective_counter.h>

namespace dtensor::testing {

// The calling rank's part of `global` laid out as `placements` on `mesh`: the
// product of the layout's global index lists (rows of the flattened leading
// dims for a merging Ragged). On a Partial mesh dim, coordinates other than 0
// hold the op's identity where it has one (0 for sum and bxor, 1 for product)
// and the value otherwise.
at::Tensor expected_local(const at::Tensor& global, const DeviceMesh& mesh,
                          const std::vector<PlacementPtr>& placements);

// "{ all_gather_v:1 local:1 }", for failure messages.
std::string describe_counts(const CollectiveCounter& counter);

}  // namespace dtensor::testing
