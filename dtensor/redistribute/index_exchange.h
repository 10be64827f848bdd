// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/index_exchange.h: moving the elements two layouts
// share, as index lists per dim. Internal to redistribute.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include <dtensor/placements/layout.h>

namespace dtensor::redistribute_internal {

// Positions, per dim, of the elements held in one layout and wanted in
// another: `held[d][i]` is a position in the holder's local list of dim d and
// `wanted[d][i]` the position of the same global index in the wanting list;
// the order is the holder's.
struct SharedPositions {
  std::vector<std::vector<int64_t>> held;
  std::vector<std::vector<int64_t>> wanted;
  int64_t numel() const;
};
SharedPositions shared_positions(const std::vector<std::vector<int64_t>>& held_lists,
                                 const std::vector<std::vector<int64_t>>& wanted_lists);

// One dim's range of a box-shaped slice.
struct Narrow {
  int64_t dim, start, length;
};
// The narrows that take the product of `positions` from a tensor of `sizes`
// when every dim's positions are one ascending range (full dims need none);
// nullopt otherwise.
std::optional<std::vector<Narrow>> box_of(const std::vector<std::vector<int64_t>>& positions,
                                          c10::IntArrayRef sizes);
// `t` cut to `box`: a view, no copy.
at::Tensor narrow_to(at::Tensor t, const std::vector<Narrow>& box);

// The shape of the product of `positions`: one extent per dim.
std::vector<int64_t> product_shape(const std::vector<std::vector<int64_t>>& positions);

// The elements of `local` at the product of `positions`, flattened.
at::Tensor gather_positions(const at::Tensor& local,
                            const std::vector<std::vector<int64_t>>& positions);
// Writes `block` (flattened, product-shaped) into `out` at the product of `positions`.
void scatter_positions(at::Tensor& out, const std::vector<std::vector<int64_t>>& positions,
                       const at::Tensor& block);

// `layout`'s index lists with the leading `merged` dims merged into rows.
std::vector<std::vector<int64_t>> merged_lists(const LocalLayout& layout,
                                               const std::vector<int64_t>& global_shape,
                                               int64_t merged);

// `local` and its index lists with the leading `merged` dims merged into rows.
// The lists of the merged dims must be full ranges (true for any valid spec
// whose other placements leave those dims alone).
struct MergedLocal {
  at::Tensor local;
  std::vector<std::vector<int64_t>> lists;
};
MergedLocal merge_leading_dims(const at::Tensor& local, const LocalLayout& layout,
                               const std::vector<int64_t>& global_shape, int64_t merged);

// How a collective along one dim can put the members' pieces straight into
// `order`: view that dim as [blocks, extent / blocks] and run the collective
// along the second one, member m owning the `pieces[m].size() / blocks`
// consecutive slots after those of members 0..m-1 in every block. So member
// m's piece is cut into `blocks` equal runs, run c landing in block c.
// blocks = 1 is plain concatenation (Shard, Ragged); a StridedShard piece
// is one run per chunk of the later split, so blocks = its split factor
// (the runs are the rank's part of each chunk). Tries 1, then the number of
// consecutive runs in the first non-empty piece; nullopt when neither puts
// every index where `order` wants it (the caller then reorders).
std::optional<int64_t> interleaved_block_count(const std::vector<std::vector<int64_t>>& pieces,
                                               const std::vector<int64_t>& order);

// `shape` with dim `dim` cut into [blocks, shape[dim] / blocks] (unchanged
// when blocks is 1).
std::vector<int64_t> split_into_blocks(std::vector<int64_t> shape, int64_t dim, int64_t blocks);

}  // namespace dtensor::redistribute_internal
