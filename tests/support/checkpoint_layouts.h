// Copyright 2026 The dtensor Authors.
//
// tests/support/checkpoint_layouts.h: global tensors with exact values in
// every tested dtype, laid out on a mesh in any placements (Partial and
// plain included), for the checkpoint suites of the local and MPI backends.
#pragma once

#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor::testing {

// Distinct values that float32, bfloat16, float64 and int64 hold exactly
// (int64 ones beyond 32 bits).
at::Tensor checkpoint_reference(const std::vector<int64_t>& shape, c10::ScalarType dtype);

// `global` laid out as `placements` on `mesh`; a Partial dim holds the value
// on its coordinate 0 and zeros elsewhere. "plain" gives a plain copy.
// Collective over the mesh (from_local's check).
at::Tensor lay_out(const at::Tensor& global, const DeviceMesh& mesh, const std::string& placements);

// The calling rank's part of `tensor` (all of a plain one).
at::Tensor local_of(const at::Tensor& tensor);

}  // namespace dtensor::testing
