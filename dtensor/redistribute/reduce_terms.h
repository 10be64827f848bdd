// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/reduce_terms.h (<dtensor/redistribute/reduce_terms.h>):
// the one way a local kernel combines values across ranks.
//
// A kernel that must communicate (a norm over a split dim, a loss's total
// weight over a split batch) holds one term per rank of a reduction over some
// mesh dims. It asks redistribute for the reduction instead of calling a
// communicator: the terms are a DTensor laid out as Partial(op) on those mesh
// dims (Replicate elsewhere), redistributed to Replicate. So the collective is
// planned, cached, counted by CollectiveCounter and shown by explain like any
// other redistribute.
//
//   at::Tensor total = dtensor::reduce_terms(part, context.mesh(), {0}, dtensor::ReduceOp::kSum);
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/reduce_op.h>

namespace dtensor {

// The reduction by `op` of the calling rank's `term` with the terms of the
// ranks that differ from it only along `mesh_dims` (every rank of the mesh
// calls it alike). An empty `mesh_dims` returns `term`.
at::Tensor reduce_terms(const at::Tensor& term, const DeviceMesh& mesh,
                        const std::vector<int64_t>& mesh_dims, ReduceOp op);

}  // namespace dtensor
