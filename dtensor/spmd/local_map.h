// Copyright 2026 The dtensor Authors.
//
// dtensor/spmd/local_map.h: run per-rank code on the local shards of DTensors.
//
// `local_map` turns `fn`, a function of plain local tensors, into a function
// of DTensors, as PyTorch's torch.distributed.tensor.experimental.local_map
// does: each DTensor input is brought to its `in_placements` (or refused,
// see LocalMapOptions), `fn` runs on the local shards, and each output is
// wrapped into a DTensor laid out as its `out_placements`. Use it for code
// the sharding rules cannot see through: custom kernels, hand-written tensor
// parallelism, per-rank routing.
//
//   // Column-parallel matmul: x replicated, w split by columns.
//   auto column_mm = dtensor::local_map(
//       [](const std::vector<at::Tensor>& in) { return std::vector{at::mm(in[0], in[1])}; },
//       /*out_placements=*/{dtensor::parse_placements("S(1)")},
//       /*in_placements=*/{dtensor::parse_placements("R"), dtensor::parse_placements("S(1)")},
//       mesh);
//   at::Tensor y = column_mm({x.tensor(), w.tensor()})[0];  // a DTensor, S(1)
//
// Gradients flow through: the inputs' local gradients become DTensor
// gradients and the outputs' DTensor gradients become local ones, each read
// in the local SPMD type of its placement (issue 21): a Shard is Varying (its
// gradient is a shard too), a Partial's gradient is the whole gradient on
// every rank (Replicate), and a Replicate is a value whose gradient is a
// pending sum (Partial(sum)). So a replicated input used by per-rank work
// (x above) gets a Partial(sum) gradient holding each rank's term, and the
// gradient of a replicated output reaches `fn` as one rank's value with
// zeros elsewhere: summed over the ranks it is exact. A Replicate output of
// `fn` is therefore R-typed (computed from R inputs alike on every rank, or
// made by spmd::all_reduce(..., ReplicatedType::kReplicate), whose backward
// all-reduces), or I-typed (spmd::all_reduce to kInvariant): then its
// gradient reaches `fn` whole on every rank. With LocalMapOptions::check_types
// (the default) `fn` runs type-checked (dtensor/spmd/types.h), which tells
// the two apart; without it a Replicate output is taken as R-typed.
//
// The call is collective over the mesh: every rank calls it with the same
// placements. Each DTensor output costs one small all-gather of the local
// shapes (from_local without a shape), so that uneven and Ragged outputs get
// their global shape right.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placement.h>
#include <dtensor/spmd/types.h>

namespace dtensor {

// A function of tensors: `fn` takes and returns plain local tensors; what
// local_map returns takes and returns DTensors (as at::Tensors) and, where
// the placements are nullopt, plain tensors.
using LocalMapFunction = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

// One placement per mesh dim, or nullopt for a plain tensor passed as it is.
using OptionalPlacements = std::optional<std::vector<PlacementPtr>>;

struct LocalMapOptions {
  // Bring a DTensor input laid out otherwise than its in_placements there
  // with a redistribute. When false, such an input is an error naming the
  // input, the placements found and those expected.
  bool redistribute_inputs = true;
  // Run `fn` under spmd::ScopedTypeCheck (dtensor/spmd/types.h): its inputs
  // are typed from their placements (a split V, R R, P P), every op of `fn`
  // is type-checked, and each output must have its placements' type (a
  // split V, P P, Replicate R or I; an untyped constant fits any).
  bool check_types = true;
  // Per input, types that replace those its placements give: I on a mesh
  // dim where the input is Replicate makes it Invariant (its gradient is
  // then the same on every rank, not a pending sum). Empty, or one entry per
  // input (nullopt keeps the placements' types).
  std::vector<std::optional<spmd::Types>> in_types;
  // Per output, its global shape where known. Without it an output laid
  // out with placements learns its shape from every rank's local shape (one
  // small all-gather: splits may be uneven). Empty, or one entry per output
  // (nullopt: learned). Each rank checks that its local output fits it.
  std::vector<std::optional<std::vector<int64_t>>> out_shapes;
};

// `fn` on the local shards of DTensors over `mesh`. `in_placements` has one
// entry per input: the placements a DTensor input is used in, or nullopt for
// a plain tensor input. `out_placements` has one entry per output of `fn`:
// how that local output is laid out, or nullopt for an output returned as
// it is. A count that does not match, a DTensor on another mesh or given
// nullopt, or a plain tensor given placements, is an error.
LocalMapFunction local_map(LocalMapFunction fn, std::vector<OptionalPlacements> out_placements,
                           std::vector<OptionalPlacements> in_placements, DeviceMesh mesh,
                           LocalMapOptions options = {});

}  // namespace dtensor
