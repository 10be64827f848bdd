// Copyright 2026 The dtensor Authors.
//
// rules/dim_map.h (<dtensor/rules/dim_map.h>): the strategy builder for views and selections whose
// output dims each come from one input dim (transpose, permute, unsqueeze, select, slice, split,
// expand...), and for reshapes (view, _unsafe_view).
//
// A `DimMap` says, for each dim of the first input, which output dim holds
// it, or kConsumed when the op cuts, selects or expands along it (such a dim
// must be Replicate). A split of a kept dim passes through
// (RuleRole::kPassThrough) to its output dim; Partial passes (these ops are
// linear); everything else is Replicate.
//
// Reshapes group input and output dims with equal products: a dim kept as is
// passes any split. Otherwise a Shard or StridedShard of a dim of the group
// holds, in the group's row-major order, the same piece of each of a number
// of equal blocks; the reshape keeps that order, so the output dim whose
// Shard or StridedShard (by torch.chunk) holds exactly those positions on
// every rank takes it: flattening [a, b] split on b gives StridedShard(0, a),
// [4,4,4] split on dim 1 viewed as [8, 8] gives StridedShard(0, 4), a
// StridedShard's blocks unflattened give a Shard of the dim after them.
// Uneven splits pass only where torch.chunk's pieces match exactly. Earlier
// mesh dims splitting the group act first, on equal pieces. Any other split
// needs Replicate, never a wrong number.
//
//   dtensor::strategies().add("aten::transpose.int", dim_map_strategy([](const OpCall& call) {
//     ... return map; }));
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <dtensor/rules/local_kernel.h>
#include <dtensor/rules/strategy.h>

namespace dtensor {

using DimMap = std::vector<int64_t>;
constexpr int64_t kConsumed = -1;

Strategy dim_map_strategy(std::function<DimMap(const OpCall&)> map);

// The local kernel of an op whose argument `size_argument` holds the global
// output shape (expand's size): the local op gets the local shape there.
LocalKernel sized_view_kernel(size_t size_argument);

// The strategy for view-like reshapes whose target shape is argument 1
// (view, _unsafe_view, _reshape_alias), and their local kernel: the shard is
// reshaped to its own output shape.
Strategy reshape_strategy();
void reshape_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack,
                    const LocalContext& context);

// The shape `sizes` with one -1 inferred for a tensor of `numel` elements.
std::vector<int64_t> infer_view_shape(std::vector<int64_t> sizes, int64_t numel);

}  // namespace dtensor
