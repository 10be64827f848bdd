// Copyright 2026 The dtensor Authors.
//
// examples/fsdp_tp/fsdp_tp_layout.h: where a parameter lives under FSDP over
// tensor parallelism on a (dp, tp) mesh, as PyTorch's FSDP2 + TP lays it out.
//
// TP splits the parameter on "tp" first (colwise S(0), rowwise S(1), or R);
// FSDP then shards what each tp rank holds over "dp". When FSDP shards the
// same tensor dim that TP split, the dp mesh dim does NOT hold a plain Shard:
// dp rank d must hold piece d of EVERY tp piece, i.e. the dim is cut into `tp`
// chunks first and each chunk into `dp` pieces. That is
// StridedShard(dim, split_factor = tp size) on dp, followed by Shard(dim) on
// tp. Hidden size 10, tp = dp = 2: rank (dp=d, tp=t) holds rows
// {0-2, 3-4, 5-7, 8-9}[2t + d], where [S(0), S(0)] would give the rows of
// index 2d + t instead.
#pragma once

#include <cstdint>
#include <vector>

#include <dtensor/placements/placement.h>

namespace dtensor::examples {

struct FsdpTpLayout {
  // How the parameter is stored between steps: [dp placement, tp placement].
  std::vector<PlacementPtr> storage;
  // How forward and backward use it: gathered over dp, [R, tp placement].
  std::vector<PlacementPtr> compute;
};

// The layout of a parameter that TP splits as `tp_placement` and FSDP shards
// along tensor dim `fsdp_dim`, on a mesh whose tp dim has `tp_size` ranks.
FsdpTpLayout fsdp_tp_layout(const PlacementPtr& tp_placement, int64_t fsdp_dim, int64_t tp_size);

}  // namespace dtensor::examples
