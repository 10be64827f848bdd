// Copyright 2026 The dtensor Authors.
//
// placements/shard.h: the mesh dim splits tensor dim `dim` the way torch.chunk
// does. Spelled "S(0)".
//
// With chunk c = ceil(S / n), coordinate r holds [c*r, min(S, c*(r+1))),
// possibly empty: 5 over 4 ranks gives 2,2,1,0 and 6 over 4 gives 2,2,2,0. An
// empty shard's global offset is S. A negative dim counts from the end and is
// resolved by `normalized` for a given tensor rank.
#pragma once

#include <dtensor/placements/placement.h>

namespace dtensor {

class Shard final : public Placement {
 public:
  static PlacementPtr make(int64_t dim);

  explicit Shard(int64_t dim) : dim_(dim) {}
  int64_t dim() const { return dim_; }

  std::string to_string() const override;
  std::string kind() const override { return "S"; }
  bool equals(const Placement& other) const override;
  size_t hash() const override;
  std::optional<int64_t> split_dim() const override { return dim_; }
  bool splits_into_ordered_blocks() const override { return true; }
  PlacementPtr normalized(int64_t tensor_ndim) const override;
  void restrict(LayoutIndices& indices, int64_t n, int64_t r) const override;
  std::optional<RangeList> held_pieces(int64_t length, int64_t n, int64_t r) const override;
  bool fills_role(RuleRole /*role*/) const override { return true; }
  PlacementPtr moved_to_dim(int64_t dim) const override { return make(dim); }

 private:
  int64_t dim_;
};

// Resolves a possibly negative tensor dim against `tensor_ndim`, or throws
// naming the placement (`what`) and the valid range.
int64_t normalize_tensor_dim(int64_t dim, int64_t tensor_ndim, std::string_view what);

}  // namespace dtensor
