// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/roles.h>

namespace dtensor {

PlacementPtr move_for_role(const Placement& p, RuleRole role, int64_t dim,
                           bool leading_dims_match) {
  if (!p.fills_role(role)) return nullptr;
  if (p.merged_leading_dims() > 1 && !leading_dims_match) return nullptr;
  return p.moved_to_dim(dim);
}

}  // namespace dtensor
