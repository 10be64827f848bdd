// Copyright 2026 The dtensor Authors.
//
// placements/ragged.h: contiguous ranges of rows in proportion to per-rank
// units. Spelled "RG(dims=1,units=[1,2,1,0])".
//
// The leading `dims` tensor dims are flattened into rows (the local tensor has
// shape [rows held, trailing dims...]) and the rows are cut into contiguous
// ranges: coordinate i of the mesh dim holds rows
// [floor(R * U_i / U), floor(R * U_{i+1} / U)) where U_i is the sum of the
// units before i and U their total. When the units are row counts summing to
// R, rank i holds exactly units[i] rows. A zero unit holds nothing; a single
// non-zero unit puts the whole tensor on one rank (block-wise quantization,
// Muon/Shampoo-style optimizers). The units are part of the identity: RG with
// other units is another placement. A tensor dim merged into the rows cannot
// be split by another mesh dim's placement.
#pragma once

#include <vector>

#include <dtensor/placements/placement.h>

namespace dtensor {

class Ragged final : public Placement {
 public:
  // Throws dtensor::Error for dims < 1, no units, a negative unit or all zero.
  static PlacementPtr make(int64_t dims, std::vector<int64_t> units);

  Ragged(int64_t dims, std::vector<int64_t> units) : dims_(dims), units_(std::move(units)) {}
  int64_t dims() const { return dims_; }
  const std::vector<int64_t>& units() const { return units_; }

  std::string to_string() const override;
  std::string kind() const override { return "RG"; }
  bool equals(const Placement& other) const override;
  size_t hash() const override;
  int64_t merged_leading_dims() const override { return dims_; }
  bool splits_into_ordered_blocks() const override { return true; }
  PlacementPtr normalized(int64_t tensor_ndim) const override;
  void restrict(LayoutIndices& indices, int64_t n, int64_t r) const override;
  void check_mesh_dim_size(int64_t n) const override;
  // Uneven by design, so never kEvenBlocks.
  bool fills_role(RuleRole role) const override { return role != RuleRole::kEvenBlocks; }
  // Ragged always splits the leading rows: it can only stay at dim 0.
  PlacementPtr moved_to_dim(int64_t dim) const override;

  // The [begin, end) rows of `rows` that coordinate r holds.
  ChunkRange row_range(int64_t rows, int64_t r) const;

 private:
  int64_t dims_;
  std::vector<int64_t> units_;
};

}  // namespace dtensor
