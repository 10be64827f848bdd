// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/strided_shard.h>

#include <algorithm>

#include <dtensor/base/check.h>
#include <dtensor/placements/parse.h>
#include <dtensor/placements/shard.h>
#include "absl/hash/hash.h"

namespace dtensor {

PlacementPtr StridedShard::make(int64_t dim, int64_t split_factor) {
  DTENSOR_CHECK(split_factor >= 1, "StridedShard(", dim, ", ", split_factor,
                "): split_factor: expected at least 1, found ", split_factor);
  return std::make_shared<const StridedShard>(dim, split_factor);
}

std::string StridedShard::to_string() const {
  return "SS(" + std::to_string(dim_) + "," + std::to_string(split_factor_) + ")";
}

bool StridedShard::equals(const Placement& other) const {
  const auto* strided = exactly<StridedShard>(other);
  return strided != nullptr && strided->dim_ == dim_ && strided->split_factor_ == split_factor_;
}

size_t StridedShard::hash() const {
  return absl::HashOf(std::string_view("SS"), dim_, split_factor_);
}

PlacementPtr StridedShard::normalized(int64_t tensor_ndim) const {
  if (dim_ >= 0 && dim_ < tensor_ndim)
    return make(dim_, split_factor_);  // named only for the error
  return make(normalize_tensor_dim(dim_, tensor_ndim, to_string()), split_factor_);
}

void StridedShard::restrict(LayoutIndices& indices, int64_t n, int64_t r) const {
  std::vector<int64_t>& along = indices.along(dim_);
  keep_pieces(along, *held_pieces(static_cast<int64_t>(along.size()), n, r));
}

std::optional<RangeList> StridedShard::held_pieces(int64_t length, int64_t n, int64_t r) const {
  std::optional<RangeList> pieces(std::in_place);
  // Chunks at or past `length` are empty (torch.chunk), however large the factor.
  for (int64_t chunk = 0; chunk < std::min(split_factor_, length); ++chunk) {
    const ChunkRange outer = torch_chunk_range(length, split_factor_, chunk);
    const ChunkRange inner = torch_chunk_range(outer.end - outer.begin, n, r);
    if (inner.begin < inner.end) {
      pieces->push_back({outer.begin + inner.begin, outer.begin + inner.end});
    }
  }
  return pieces;
}

namespace {

PlacementPtr parse_strided_shard(const PlacementArguments& arguments) {
  arguments.expect_count(2, 2);
  const int64_t split_factor = arguments.integer(1, "split_factor");
  if (split_factor < 1) arguments.fail(1, "split_factor", "at least 1");
  return StridedShard::make(arguments.integer(0, "dim"), split_factor);
}

DTENSOR_REGISTER(parse_strided_shard_spelling) {
  placement_parsers().add("SS", parse_strided_shard);
}

}  // namespace
}  // namespace dtensor
