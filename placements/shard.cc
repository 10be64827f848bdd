// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/shard.h>

#include <array>

#include <dtensor/base/check.h>
#include <dtensor/placements/parse.h>
#include "absl/hash/hash.h"

namespace dtensor {

int64_t normalize_tensor_dim(int64_t dim, int64_t tensor_ndim, std::string_view what) {
  DTENSOR_CHECK(dim >= -tensor_ndim && dim < tensor_ndim, what, ": expected a tensor dim in [",
                -tensor_ndim, ", ", tensor_ndim, ") for a ", tensor_ndim, "-D tensor, found ", dim);
  return dim < 0 ? dim + tensor_ndim : dim;
}

PlacementPtr Shard::make(int64_t dim) {
  // Placements are immutable: the dims most tensors split share one object
  // each, so the specs made on every first call and planner state (which
  // normalize their placements) allocate no Shard. Never destroyed, like
  // the registries: usable until the process ends.
  static const auto* common = [] {
    auto* shards = new std::array<PlacementPtr, 8>;
    for (size_t d = 0; d < shards->size(); ++d) {
      (*shards)[d] = std::make_shared<const Shard>(static_cast<int64_t>(d));
    }
    return shards;
  }();
  if (dim >= 0 && dim < static_cast<int64_t>(common->size())) return (*common)[dim];
  return std::make_shared<const Shard>(dim);
}

std::string Shard::to_string() const { return "S(" + std::to_string(dim_) + ")"; }

bool Shard::equals(const Placement& other) const {
  const auto* shard = exactly<Shard>(other);
  return shard != nullptr && shard->dim_ == dim_;
}

size_t Shard::hash() const { return absl::HashOf(std::string_view("S"), dim_); }

PlacementPtr Shard::normalized(int64_t tensor_ndim) const {
  if (dim_ >= 0 && dim_ < tensor_ndim) return make(dim_);  // named only for the error
  return make(normalize_tensor_dim(dim_, tensor_ndim, to_string()));
}

std::optional<RangeList> Shard::held_pieces(int64_t length, int64_t n, int64_t r) const {
  const ChunkRange block = torch_chunk_range(length, n, r);
  std::optional<RangeList> pieces(std::in_place);
  if (block.begin < block.end) pieces->push_back(block);
  return pieces;
}

void Shard::restrict(LayoutIndices& indices, int64_t n, int64_t r) const {
  std::vector<int64_t>& along = indices.along(dim_);
  keep_range(along, torch_chunk_range(static_cast<int64_t>(along.size()), n, r));
}

namespace {

PlacementPtr parse_shard(const PlacementArguments& arguments) {
  arguments.expect_count(1, 1);
  return Shard::make(arguments.integer(0, "dim"));
}

DTENSOR_REGISTER(parse_shard_spelling) { placement_parsers().add("S", parse_shard); }

}  // namespace
}  // namespace dtensor
