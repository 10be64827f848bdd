// Copyright 2026 The dtensor Authors.
//
// rules/roles.h: small questions rule families ask of placements, in terms
// of roles (placements/placement.h RuleRole) rather than kinds.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <dtensor/placements/placement.h>

namespace dtensor {

// `p` moved to tensor dim `dim` of an operand, when `p` fills `role` and can
// move there; nullptr otherwise. A placement merging k > 1 leading dims moves
// only between operands whose leading k dims are the same (the caller says
// so with `leading_dims_match`).
PlacementPtr move_for_role(const Placement& p, RuleRole role, int64_t dim,
                           bool leading_dims_match = true);

}  // namespace dtensor
