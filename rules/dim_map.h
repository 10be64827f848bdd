// Copyright 2026 The dtensor Authors.
//
// rules/dim_map.h: the rule builder for views and selections whose output
// dims each come from one input dim (transpose, permute, unsqueeze, select,
// slice, split, expand...), and for reshapes (view, _unsafe_view).
//
// A `DimMap` says, for each dim of the first input, which output dim holds
// it, or kConsumed when the op cuts, selects or expands along it (such a dim
// must be Replicate). A split of a kept dim passes through
// (RuleRole::kPassThrough) to its output dim; Partial passes (these ops are
// linear); everything else is Replicate.
//
// Reshapes group input and output dims with equal products: a dim kept as is
// passes any split; merging dims passes a Shard of the first dim of the group
// as Shard and of a later one as StridedShard (when the sizes divide evenly
// by the mesh); splitting a dim passes its Shard to the first new dim when it
// divides evenly; any other split needs Replicate, never a wrong number.
//
//   registry.add("aten::transpose.int", dim_map_rule([](const OpCall& call) {
//     ... return map; }));
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "rules/rule.h"

namespace dtensor {

using DimMap = std::vector<int64_t>;
constexpr int64_t kConsumed = -1;

// `size_argument`, when given, is an argument holding the global output
// shape (expand's size): the local op gets the local shape there instead.
OpRule dim_map_rule(std::function<DimMap(const OpCall&)> map,
                    std::optional<size_t> size_argument = std::nullopt);

// The rule for view-like reshapes whose target shape is argument 1 (view,
// _unsafe_view, _reshape_alias). Locally the shard is reshaped to its own
// output shape.
OpRule reshape_rule();

// The shape `sizes` with one -1 inferred for a tensor of `numel` elements.
std::vector<int64_t> infer_view_shape(std::vector<int64_t> sizes, int64_t numel);

}  // namespace dtensor
