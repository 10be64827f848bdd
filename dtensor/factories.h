// Copyright 2026 The dtensor Authors.
//
// dtensor/factories.h: DTensors made in place, each rank creating only its
// own shard.
//
//   auto w = dtensor::zeros({1024, 4096}, mesh, dtensor::parse_placements("S(0),R"));
//   auto x = dtensor::randn({8, 512}, mesh, dtensor::parse_placements("R,S(1)"), /*seed=*/42);
//
// Values never depend on the placements: ones/full hold the value everywhere
// in the global tensor (a Partial(sum) placement puts it on coordinate 0 and
// zeros elsewhere, so the reduction is exact), and rand/randn equal
// `at::rand(shape, generator)` for a CPU generator seeded with `seed`, on
// every mesh and layout. rand/randn generate the global values on each rank
// and keep their part (simple and exact; costs the global size in time, not
// in memory kept). `options` picks the dtype (default float32); the device is
// always the mesh's.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <dtensor/dtensor.h>

namespace dtensor {

DTensor empty(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
              const std::vector<PlacementPtr>& placements, at::TensorOptions options = {});
DTensor zeros(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
              const std::vector<PlacementPtr>& placements, at::TensorOptions options = {});
DTensor ones(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
             const std::vector<PlacementPtr>& placements, at::TensorOptions options = {});
DTensor full(const std::vector<int64_t>& shape, const at::Scalar& value, const DeviceMesh& mesh,
             const std::vector<PlacementPtr>& placements, at::TensorOptions options = {});
DTensor rand(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
             const std::vector<PlacementPtr>& placements, uint64_t seed,
             at::TensorOptions options = {});
DTensor randn(const std::vector<int64_t>& shape, const DeviceMesh& mesh,
              const std::vector<PlacementPtr>& placements, uint64_t seed,
              at::TensorOptions options = {});

}  // namespace dtensor
