// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/index_exchange.h: moving the elements two layouts
// share, as index lists per dim. Internal to redistribute.
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/core/Tensor.h>

#include "placements/layout.h"

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

}  // namespace dtensor::redistribute_internal
