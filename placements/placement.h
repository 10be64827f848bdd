// Copyright 2026 The dtensor Authors.
//
// placements/placement.h: how one mesh dim lays a tensor out, and the contract
// a user-defined placement implements.
//
// A DTensor carries one `Placement` per mesh dim, read left to right: mesh
// dim 0 splits the global tensor, mesh dim 1 splits each piece, and so on.
// The built-in kinds are `Replicate` ("R"), `Shard(d)` ("S(d)"),
// `Partial(op)` ("P(sum)"), `StridedShard(d, sf)` ("SS(d,sf)") and
// `Ragged(dims, units)` ("RG(dims=1,units=[1,2,1,0])"); each lives, whole, in
// its own file beside this one.
//
// The layout contract is one function, `restrict`: given the global indices
// a rank holds so far along every tensor dim (in local order), keep those that
// coordinate `r` of a mesh dim of `n` ranks holds. Composing `restrict` over
// the mesh dims gives every rank's local shape, global offset and global index
// lists (placements/layout.h). A user placement that implements it gets
// distribute, full_tensor and redistribute to and from every other placement
// through the generic path; it may register faster transitions later.
//
// Code never asks "is this a Shard?" by casting: it asks the questions below
// (`split_dim`, `is_partial`, ...), so a new placement is treated by what it
// declares, and a StridedShard is never mistaken for a Shard.
//
//   dtensor::PlacementPtr p = dtensor::Shard::make(0);
//   p->to_string();                               // "S(0)"
//   *p == *dtensor::parse_placement("S(0)");      // true
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include <dtensor/mesh/reduce_op.h>
#include "absl/container/inlined_vector.h"

namespace dtensor {

// The global indices a rank holds along every tensor dim, in the order its
// local tensor stores them: the local tensor is the sub-tensor at their
// product. When a Ragged placement merges the leading `merged` dims into rows,
// those dims share one list of flattened row numbers and the local tensor has
// shape [rows, trailing dims...].
class LayoutIndices {
 public:
  // Every index of `global_shape`, with its leading `merged` dims merged
  // (merged <= 1 merges nothing).
  LayoutIndices(const std::vector<int64_t>& global_shape, int64_t merged);
  // The length of each list such a LayoutIndices starts with (the global
  // extent of each local dim), without building the lists.
  static std::vector<int64_t> extents(const std::vector<int64_t>& global_shape, int64_t merged);

  int64_t tensor_ndim() const { return tensor_ndim_; }
  int64_t merged() const { return merged_; }
  // The indices held along tensor dim `dim` (normalized, >= 0). Throws when
  // `dim` was merged into rows: no placement may split it on its own.
  std::vector<int64_t>& along(int64_t dim);
  const std::vector<int64_t>& along(int64_t dim) const;
  // The (flattened) leading rows: what a Ragged placement splits.
  std::vector<int64_t>& rows() { return lists_[0]; }
  // One list per dim of the local tensor.
  const std::vector<std::vector<int64_t>>& lists() const { return lists_; }
  // The lists, moved out of a LayoutIndices that is done with:
  // std::move(indices).release_lists().
  std::vector<std::vector<int64_t>> release_lists() && { return std::move(lists_); }

 private:
  int64_t list_of(int64_t dim) const;

  int64_t tensor_ndim_;
  int64_t merged_;
  std::vector<std::vector<int64_t>> lists_;
};

// torch.chunk's split of `length` items into `n` pieces: piece `r` is
// [begin, end) with chunk = ceil(length / n); trailing pieces may be empty.
struct ChunkRange {
  int64_t begin;
  int64_t end;
};

// [begin, end) ranges of indices or positions in rising order, disjoint and
// none empty: what a rank holds of a dim. Most hold one or two (a Shard's
// block, a StridedShard's pieces), kept inline.
using RangeList = absl::InlinedVector<ChunkRange, 2>;

inline bool operator==(const ChunkRange& a, const ChunkRange& b) {
  return a.begin == b.begin && a.end == b.end;
}
// How many indices (or positions) `ranges` hold.
int64_t count_held(const RangeList& ranges);
// Appends [begin, end), which starts at or after the last range's end, to
// `ranges`, merged with the last range when it touches it (so `ranges` stays
// canonical). Inline: layouts call it per piece.
inline void append_run(RangeList& ranges, int64_t begin, int64_t end) {
  if (!ranges.empty() && ranges.back().end == begin) {
    ranges.back().end = end;
  } else {
    ranges.push_back({begin, end});
  }
}

class Placement;
using PlacementPtr = std::shared_ptr<const Placement>;

// The parts a placement can play in a sharding rule (rules/ speaks of roles,
// never of kinds, so a new placement works with every rule it honestly fits):
//  - kPassThrough: a dim the op maps element for element from inputs to
//    outputs (batch dims, elementwise dims): any split, identical on every
//    operand, passes through.
//  - kContraction: a dim the op sums over (mm's k): an identical split on
//    both operands gives each rank a term of the sum, i.e. Partial(sum).
//  - kEvenBlocks: consecutive blocks in coordinate order (`held_pieces`
//    says which: one piece each), which view ops may merge into or split
//    out of neighbouring dims where the same positions are a split of the
//    output (always when the blocks are equal, for torch.chunk's uneven ones
//    only where they match).
enum class RuleRole { kPassThrough, kContraction, kEvenBlocks };

class Placement {
 public:
  virtual ~Placement() = default;

  // The spelling `parse_placement` reads back, e.g. "S(0)".
  virtual std::string to_string() const = 0;
  // The kind's name as it is spelled and registered with the parser ("S",
  // "R", "P", "SS", "RG", a plugin's own); transitions are registered by
  // pairs of kinds. Default: the spelling up to its first parenthesis.
  virtual std::string kind() const;
  // Same kind and same parameters.
  virtual bool equals(const Placement& other) const = 0;
  virtual size_t hash() const = 0;

  // Every rank holds the whole (current piece of the) tensor.
  virtual bool is_replicate() const { return false; }
  // Ranks hold terms of a pending reduction; `partial_op` says which.
  virtual bool is_partial() const { return false; }
  virtual std::optional<ReduceOp> partial_op() const { return std::nullopt; }
  // The tensor dim whose indices this placement splits, if any (Shard,
  // StridedShard and dim-splitting user placements). Only meaningful after
  // `normalized`, which resolves negative dims.
  virtual std::optional<int64_t> split_dim() const { return std::nullopt; }
  // Whether the pieces of the split dim are consecutive blocks in coordinate
  // order (Shard, Ragged), so a reduce-scatter or an all-gather produces them
  // directly. StridedShard and most user placements interleave.
  virtual bool splits_into_ordered_blocks() const { return false; }
  // For a placement that cuts its split dim into `k` equal consecutive blocks
  // and splits every block alike among the ranks (StridedShard: k is its
  // split factor), k; nullopt for every other placement. A view that makes
  // those blocks a dim of their own leaves a plain Shard of the next dim.
  virtual std::optional<int64_t> strided_blocks() const { return std::nullopt; }
  // How many leading tensor dims this placement merges into one before it
  // splits (Ragged); 0 for every placement that works dim by dim.
  virtual int64_t merged_leading_dims() const { return 0; }

  // This placement for a tensor of `tensor_ndim` dims: resolves negative dims
  // and throws dtensor::Error if it cannot apply (e.g. a dim out of range).
  virtual PlacementPtr normalized(int64_t tensor_ndim) const = 0;

  // The layout contract (see the file comment): keep, of the indices held so
  // far, those that coordinate `r` of a mesh dim of `n` ranks holds.
  virtual void restrict(LayoutIndices& indices, int64_t n, int64_t r) const = 0;

  // Throws dtensor::Error if this placement cannot lay out a mesh dim of `n`
  // ranks (e.g. Ragged units of the wrong length). Default: any n.
  virtual void check_mesh_dim_size(int64_t /*n*/) const {}

  // For a placement with a split_dim whose `restrict` keeps, of that dim
  // alone, positions that depend on `length` (what is held so far), `n` and
  // `r` only: those positions for coordinate `r` of `n`, as non-empty
  // [begin, end) pieces in rising order (Shard: its torch.chunk block;
  // StridedShard: its piece of each chunk). nullopt otherwise (the default).
  // Layouts made only of such placements, Replicate and Partial are computed
  // as runs of indices, without index lists (the planner makes thousands).
  // The pieces are checked for order and range, and, for dims short enough
  // to list, against what `restrict` keeps (placements/layout.cc: once per
  // thread and (placement, length, n, r); Shard and StridedShard aside).
  virtual std::optional<RangeList> held_pieces(int64_t /*length*/, int64_t /*n*/,
                                               int64_t /*r*/) const {
    return std::nullopt;
  }

  // Whether this placement fills `role` in sharding rules (see RuleRole).
  // Default: no role, so a user placement joins rules only where it says so.
  virtual bool fills_role(RuleRole /*role*/) const { return false; }
  // The same split applied to tensor dim `dim` of another operand (how a
  // rule lines one operand's split up with another's), or nullptr when this
  // placement cannot split that dim. Default: nullptr.
  virtual PlacementPtr moved_to_dim(int64_t /*dim*/) const { return nullptr; }
};

// `p` as a `T` when it is one, else nullptr. For final placement classes
// only, where it answers what dynamic_cast would with one type comparison
// (placements are compared at every step the planner prices).
template <typename T>
const T* exactly(const Placement& p) {
  static_assert(std::is_final_v<T>, "exactly<T> needs a final T");
  return typeid(p) == typeid(T) ? static_cast<const T*>(&p) : nullptr;
}

inline bool operator==(const Placement& a, const Placement& b) { return a.equals(b); }
inline bool operator!=(const Placement& a, const Placement& b) { return !a.equals(b); }
inline std::ostream& operator<<(std::ostream& out, const Placement& p) {
  return out << p.to_string();
}

// The tensor dims `p` splits: its split_dim, or every leading dim it merges
// into rows (Ragged); none for Replicate and Partial.
std::vector<int64_t> split_tensor_dims(const Placement& p);
// The first of them (0 for a placement merging leading dims: the dim rules
// line operands up by), or nullopt.
std::optional<int64_t> split_dim_of(const Placement& p);
// Whether `p` splits tensor dim `dim`.
bool splits_tensor_dim(const Placement& p, int64_t dim);

// Element-wise equality of two placement lists.
bool same_placements(const std::vector<PlacementPtr>& a, const std::vector<PlacementPtr>& b);
// "S(0),R" for a list; parse_placements reads it back.
std::string placements_to_string(const std::vector<PlacementPtr>& placements);

// Hashes a placement list (for caches keyed by layouts).
struct PlacementListHash {
  size_t operator()(const std::vector<PlacementPtr>& placements) const;
};

ChunkRange torch_chunk_range(int64_t length, int64_t n, int64_t r);

// Keeps positions [range.begin, range.end) of `indices`.
void keep_range(std::vector<int64_t>& indices, ChunkRange range);
// Keeps the positions of `indices` that `pieces` (in rising order) name.
void keep_pieces(std::vector<int64_t>& indices, const RangeList& pieces);

}  // namespace dtensor
