// Copyright 2026 The dtensor Authors.
//
// InterleavedShard: see interleaved_shard.h. Only dtensor's public headers.
#include "interleaved_shard.h"

#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/placements/parse.h>

namespace dtensor {
namespace {

size_t combine(size_t seed, size_t value) {
  return seed ^ (value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

}  // namespace

PlacementPtr InterleavedShard::make(int64_t dim, int64_t interleave) {
  DTENSOR_CHECK(interleave >= 1, "InterleavedShard(", dim, ", ", interleave,
                "): interleave: expected at least 1, found ", interleave);
  return std::make_shared<const InterleavedShard>(dim, interleave);
}

std::string InterleavedShard::to_string() const {
  return "IS(" + std::to_string(dim_) + "," + std::to_string(interleave_) + ")";
}

bool InterleavedShard::equals(const Placement& other) const {
  const auto* interleaved = dynamic_cast<const InterleavedShard*>(&other);
  return interleaved != nullptr && interleaved->dim_ == dim_ &&
         interleaved->interleave_ == interleave_;
}

size_t InterleavedShard::hash() const {
  size_t seed = std::hash<std::string_view>{}("InterleavedShard");
  seed = combine(seed, std::hash<int64_t>{}(dim_));
  return combine(seed, std::hash<int64_t>{}(interleave_));
}

PlacementPtr InterleavedShard::normalized(int64_t tensor_ndim) const {
  DTENSOR_CHECK(dim_ >= -tensor_ndim && dim_ < tensor_ndim, to_string(),
                ": expected a tensor dim in [", -tensor_ndim, ", ", tensor_ndim, ") for a ",
                tensor_ndim, "-D tensor, found ", dim_);
  return make(dim_ < 0 ? dim_ + tensor_ndim : dim_, interleave_);
}

void InterleavedShard::restrict(LayoutIndices& indices, int64_t n, int64_t r) const {
  std::vector<int64_t>& along = indices.along(dim_);
  const int64_t length = static_cast<int64_t>(along.size());
  DTENSOR_CHECK(length % interleave_ == 0, to_string(), ": tensor dim ", dim_, " has size ", length,
                ", which is not divisible by interleave ", interleave_, " (it must consist of ",
                interleave_, " equal blocks)");
  const int64_t block = length / interleave_;
  const ChunkRange mine = torch_chunk_range(block, n, r);
  std::vector<int64_t> kept;
  kept.reserve(static_cast<size_t>(interleave_ * (mine.end - mine.begin)));
  for (int64_t b = 0; b < interleave_; ++b) {
    kept.insert(kept.end(), along.begin() + b * block + mine.begin,
                along.begin() + b * block + mine.end);
  }
  along = std::move(kept);
}

namespace {

PlacementPtr parse_interleaved_shard(const PlacementArguments& arguments) {
  arguments.expect_count(2, 2);
  const int64_t interleave = arguments.integer(1, "interleave");
  if (interleave < 1) arguments.fail(1, "interleave", "at least 1");
  return InterleavedShard::make(arguments.integer(0, "dim"), interleave);
}

DTENSOR_REGISTER(parse_interleaved_shard_spelling) {
  placement_parsers().add("IS", parse_interleaved_shard);
}

}  // namespace
}  // namespace dtensor
