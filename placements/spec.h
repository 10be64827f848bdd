// Copyright 2026 The dtensor Authors.
//
// placements/spec.h (<dtensor/placements/spec.h>): what a DTensor is, apart from its data: the
// mesh, one placement per mesh dim, and the global shape and dtype.
//
// A spec is immutable and validated on construction (placements normalized,
// one per mesh dim, shard dims in range, Ragged units matching the mesh). It
// answers which part of the global tensor any rank holds.
//
//   auto spec = std::make_shared<const dtensor::DTensorSpec>(
//       mesh, dtensor::parse_placements("S(0),R"), std::vector<int64_t>{8, 8}, at::kFloat);
//   spec->local_layout().local_shape;   // {4, 8} on a (2, 2) mesh
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <c10/core/ScalarType.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/layout.h>
#include <dtensor/placements/placement.h>

namespace dtensor {

class DTensorSpec {
 public:
  DTensorSpec(DeviceMesh mesh, std::vector<PlacementPtr> placements, std::vector<int64_t> shape,
              c10::ScalarType dtype);

  const DeviceMesh& mesh() const { return mesh_; }
  const std::vector<PlacementPtr>& placements() const { return placements_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  // Row-major strides of the global shape.
  std::vector<int64_t> stride() const;
  c10::ScalarType dtype() const { return dtype_; }
  int64_t ndim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numel() const;

  // The same tensor with other placements (validated).
  DTensorSpec with_placements(std::vector<PlacementPtr> placements) const;

  // What the calling rank holds (computed once).
  const LocalLayout& local_layout() const { return local_layout_; }
  // What the rank at `coordinate` holds.
  LocalLayout layout_at(const std::vector<int64_t>& coordinate) const;
  // Per dim of the local shards, the smallest size any rank of the mesh
  // holds (0 when some rank holds nothing of it). Computed on first use and
  // kept; copies of a spec share it.
  const std::vector<int64_t>& min_local_sizes() const;
  // Whether any mesh dim holds a pending reduction.
  bool has_partial() const;

  // "[8, 8] float as S(0),R on DeviceMesh((dp=2, tp=2), ranks=[0, 1, 2, 3])".
  std::string to_string() const;

  friend bool operator==(const DTensorSpec& a, const DTensorSpec& b);
  friend bool operator!=(const DTensorSpec& a, const DTensorSpec& b) { return !(a == b); }
  // Computed once, at construction.
  size_t hash() const { return hash_; }

 private:
  DeviceMesh mesh_;
  std::vector<PlacementPtr> placements_;
  std::vector<int64_t> shape_;
  c10::ScalarType dtype_;
  LocalLayout local_layout_;
  size_t hash_ = 0;
  struct MinLocalSizes;
  std::shared_ptr<MinLocalSizes> min_local_sizes_;
};

using DTensorSpecPtr = std::shared_ptr<const DTensorSpec>;

}  // namespace dtensor
