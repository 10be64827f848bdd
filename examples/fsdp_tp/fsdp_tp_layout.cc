// Copyright 2026 The dtensor Authors.
#include "examples/fsdp_tp/fsdp_tp_layout.h"

#include <dtensor/placements/replicate.h>
#include <dtensor/placements/shard.h>
#include <dtensor/placements/strided_shard.h>

namespace dtensor::examples {

FsdpTpLayout fsdp_tp_layout(const PlacementPtr& tp_placement, int64_t fsdp_dim, int64_t tp_size) {
  // The dp placement comes first in the list but splits second in spirit:
  // when tp already splits `fsdp_dim`, dp must take its piece of each of the
  // tp chunks, which is exactly what StridedShard's split_factor describes.
  const bool tp_splits_same_dim = tp_placement->split_dim() == fsdp_dim;
  PlacementPtr dp_placement =
      tp_splits_same_dim ? StridedShard::make(fsdp_dim, tp_size) : Shard::make(fsdp_dim);
  return {{dp_placement, tp_placement}, {Replicate::make(), tp_placement}};
}

}  // namespace dtensor::examples
