// Copyright 2026 The dtensor Authors.
//
// examples/interleaved_shard/interleaved_shard.h: InterleavedShard, the
// reference user placement. Spelled "IS(dim,interleave)".
//
// A merged QKV projection stores Q, K and V one after the other along one
// tensor dim: that dim is `interleave` equal consecutive blocks. Tensor
// parallelism must give every rank its part of EACH block (its heads of Q, of
// K and of V), not a contiguous third of the whole. InterleavedShard(dim,
// interleave) does that: every block is split the way torch.chunk splits it,
// and rank r holds its chunk of block 0, then of block 1, ..., concatenated in
// block order. Dim size 12, interleave 3 (blocks [0..3], [4..7], [8..11]) over
// 2 ranks:
//
//   rank 0 holds 0,1, 4,5, 8,9      rank 1 holds 2,3, 6,7, 10,11
//
// The dim size (of the piece this mesh dim splits) must be divisible by
// `interleave`; otherwise laying the tensor out throws dtensor::Error naming
// both numbers.
//
//   #include "interleaved_shard.h"          // and link dtensor_interleaved_shard
//   auto qkv = dtensor::distribute_tensor(w, mesh, {dtensor::InterleavedShard::make(0, 3)});
//   auto same = dtensor::parse_placements("IS(0,3)");   // the registered spelling
//   auto rows = qkv.redistribute(dtensor::parse_placements("S(0)"));
//
// WRITING A USER PLACEMENT: WHAT TO IMPLEMENT
// -------------------------------------------
// This file and interleaved_shard.cc use only dtensor's public headers
// (<dtensor/placements/placement.h>, <dtensor/placements/parse.h>,
// <dtensor/base/check.h>). A
// placement subclasses dtensor::Placement and implements:
//
//  * restrict(indices, n, r): THE layout contract. `indices.along(dim)` is the
//    list of global indices the rank holds so far along `dim` (in local
//    order, after the mesh dims to the left have restricted it); keep those
//    that coordinate r of a mesh dim of n ranks holds, in the order the local
//    tensor stores them. This is also where the placement sees the size it
//    splits (the list's length), so size checks (here: divisible by
//    `interleave`) go here, through DTENSOR_CHECK.
//  * normalized(tensor_ndim): resolve a negative dim, throw if out of range.
//  * to_string(), equals(other), hash(): identity. Every parameter that changes
//    the layout is part of equality and hash (IS(0,3) != IS(0,2) != S(0)):
//    specs, plan caches and rules key on them.
//  * split_dim(): the tensor dim it splits. Optional, but declare it when the
//    placement splits one dim: the generic gather to Replicate needs it, and
//    the planner uses it to keep steps local to their group.
//  * A spelling, registered once in the .cc with
//    DTENSOR_REGISTER and placement_parsers(), so parse_placement(s) and printing
//    round-trip (to_string must produce what the parser reads).
//
// and leaves the rest at the base class defaults: is_replicate/is_partial
// false, merged_leading_dims 0, check_mesh_dim_size accepting any n, and
// splits_into_ordered_blocks FALSE. That last one matters: declare it only if
// the pieces of the split dim are consecutive blocks in coordinate order
// (Shard), because then reduce-scatter results are taken as the layout
// as-is, unchecked. InterleavedShard interleaves, so it must not (the
// transitions find its block structure from the index lists instead).
//
// WHAT IT GETS FOR FREE
// ---------------------
// With only the above, every layout query and every data movement works,
// exactly (bit-equal to the single-device tensor), on every backend and mesh:
//
//  * local shapes, global offsets and index lists (compute_local_layout
//    composes `restrict` over the mesh dims, nested with any other placement,
//    e.g. [IS(0,3), S(1)] on a 2-D mesh);
//  * distribute_tensor, from_local (with its shape checks), full_tensor;
//  * redistribute to and from every other placement, through the generic
//    transitions, each one collective per mesh dim (or none):
//      IS -> R          one all_gather_v straight into place: each rank's
//                       piece is one equal run per block, so the gather runs
//                       along a [blocks, ...] view of the dim (any other
//                       order would cost one local reorder after the gather)
//      R -> IS          a local slice, no communication
//      IS <-> S, SS, RG, another IS    one all_to_all_v of what each rank needs
//      P -> IS          one reduce_scatter_v along the same blocked view
//  * plans that print (plan_redistribute(...)->to_string()), plan caching,
//    collective counting.
//
// A placement may later register faster transitions for its own moves
// (dtensor/redistribute/transition.h, DTENSOR_REGISTER_TRANSITION); the
// generic ones stay as the fallback.
//
// ATen OPS: ROLES, AND ONE RULE OF ITS OWN
// ----------------------------------------
// Sharding rules speak of roles (placements/placement.h RuleRole). IS
// declares kPassThrough and kContraction through fills_role and moved_to_dim,
// so every built-in rule that moves a split through an op moves IS too:
// at::linear(x_R, W as IS(0,3)) gives an output whose last dim is IS(1,3),
// pointwise ops keep it, with no rule written for them. What no built-in rule
// can know is what IS means: interleaved_split_rule.cc adds, through the
// public registry, that splitting an IS(d,k) dim into its k blocks (split,
// chunk, split_with_sizes) gives k outputs of plain S(d), computed locally:
// merged QKV becomes q, k, v sharded by heads with no communication
// (merged_qkv.h; the demo prints it:
// `./build/examples/interleaved_shard/interleaved_shard_demo`).
//
// Build it as a SHARED (or OBJECT) library: the spelling registers from a
// static initializer, which a STATIC archive may drop when nothing else in
// the object file is referenced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include <dtensor/placements/placement.h>

namespace dtensor {

class InterleavedShard final : public Placement {
 public:
  // Throws dtensor::Error unless interleave >= 1.
  static PlacementPtr make(int64_t dim, int64_t interleave);

  InterleavedShard(int64_t dim, int64_t interleave) : dim_(dim), interleave_(interleave) {}
  int64_t dim() const { return dim_; }
  int64_t interleave() const { return interleave_; }

  std::string to_string() const override;
  bool equals(const Placement& other) const override;
  size_t hash() const override;
  std::optional<int64_t> split_dim() const override { return dim_; }
  // splits_into_ordered_blocks() stays false: the pieces interleave.
  PlacementPtr normalized(int64_t tensor_ndim) const override;
  void restrict(LayoutIndices& indices, int64_t n, int64_t r) const override;
  // Each rank's rows are the same positions of every block whatever the dim,
  // so elementwise ops and contractions over the dim fit; view merges do not.
  bool fills_role(RuleRole role) const override { return role != RuleRole::kEvenBlocks; }
  PlacementPtr moved_to_dim(int64_t dim) const override { return make(dim, interleave_); }

 private:
  int64_t dim_;
  int64_t interleave_;
};

}  // namespace dtensor
