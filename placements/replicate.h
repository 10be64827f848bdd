// Copyright 2026 The dtensor Authors.
//
// placements/replicate.h: every rank of the mesh dim holds the same value.
// Spelled "R".
#pragma once

#include <dtensor/placements/placement.h>

namespace dtensor {

class Replicate final : public Placement {
 public:
  static PlacementPtr make();

  std::string to_string() const override { return "R"; }
  std::string kind() const override { return "R"; }
  bool equals(const Placement& other) const override;
  size_t hash() const override;
  bool is_replicate() const override { return true; }
  PlacementPtr normalized(int64_t /*tensor_ndim*/) const override { return make(); }
  void restrict(LayoutIndices& /*indices*/, int64_t /*n*/, int64_t /*r*/) const override {}
};

}  // namespace dtensor
