// Copyright 2026 The dtensor Authors.
//
// placements/partial.h: each rank of the mesh dim holds a term of a pending
// reduction; the value is `op` over the terms. Spelled "P(sum)", "P(max)", ...
// ("P" alone is "P(sum)").
//
// Making a Partial from a Replicate value must not change the value: for sum
// coordinate 0 keeps it and the others hold zeros; avg, max, min and product
// (and the bitwise ops) keep the value on every rank. Several Partial mesh
// dims reduce left to right by mesh dim.
#pragma once

#include <dtensor/placements/placement.h>

namespace dtensor {

class Partial final : public Placement {
 public:
  static PlacementPtr make(ReduceOp op = ReduceOp::kSum);

  explicit Partial(ReduceOp op) : op_(op) {}
  ReduceOp op() const { return op_; }

  std::string to_string() const override;
  std::string kind() const override { return "P"; }
  bool equals(const Placement& other) const override;
  size_t hash() const override;
  bool is_partial() const override { return true; }
  std::optional<ReduceOp> partial_op() const override { return op_; }
  PlacementPtr normalized(int64_t /*tensor_ndim*/) const override { return make(op_); }
  void restrict(LayoutIndices& /*indices*/, int64_t /*n*/, int64_t /*r*/) const override {}

 private:
  ReduceOp op_;
};

}  // namespace dtensor
