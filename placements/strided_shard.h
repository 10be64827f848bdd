// Copyright 2026 The dtensor Authors.
//
// placements/strided_shard.h: a split of tensor dim `dim` into interleaved
// pieces. Spelled "SS(0,2)".
//
// The dim is cut into `split_factor` chunks (torch.chunk), each chunk is cut
// into n chunks (torch.chunk), and coordinate r holds the concatenation of the
// r-th piece of every chunk: L=9, split_factor=2, n=4 gives [0,1,5], [2,3,6],
// [4,7], [8]. FSDP over tensor parallelism on mesh (dp, tp) is
// [StridedShard(0, tp), Shard(0)]. It is its own kind, not a Shard: with
// split_factor 1 it holds what Shard would, yet equality, rules and
// redistribute treat it as a StridedShard.
#pragma once

#include <dtensor/placements/placement.h>

namespace dtensor {

class StridedShard final : public Placement {
 public:
  // Throws dtensor::Error if split_factor < 1.
  static PlacementPtr make(int64_t dim, int64_t split_factor);

  StridedShard(int64_t dim, int64_t split_factor) : dim_(dim), split_factor_(split_factor) {}
  int64_t dim() const { return dim_; }
  int64_t split_factor() const { return split_factor_; }

  std::string to_string() const override;
  std::string kind() const override { return "SS"; }
  bool equals(const Placement& other) const override;
  size_t hash() const override;
  std::optional<int64_t> split_dim() const override { return dim_; }
  std::optional<int64_t> strided_blocks() const override { return split_factor_; }
  PlacementPtr normalized(int64_t tensor_ndim) const override;
  void restrict(LayoutIndices& indices, int64_t n, int64_t r) const override;
  std::optional<RangeList> held_pieces(int64_t length, int64_t n, int64_t r) const override;
  // Interleaved pieces: never the even blocks view ops merge.
  bool fills_role(RuleRole role) const override { return role != RuleRole::kEvenBlocks; }
  PlacementPtr moved_to_dim(int64_t dim) const override { return make(dim, split_factor_); }

 private:
  int64_t dim_;
  int64_t split_factor_;
};

}  // namespace dtensor
