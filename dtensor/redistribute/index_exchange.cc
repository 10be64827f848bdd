// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/index_exchange.h>

#include <numeric>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/base/check.h>
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"

namespace dtensor::redistribute_internal {
namespace {

// Whether `positions` are consecutive, first, first + 1, ...
bool is_range(const std::vector<int64_t>& positions) {
  for (size_t i = 1; i < positions.size(); ++i) {
    if (positions[i] != positions[0] + static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool is_identity(const std::vector<int64_t>& positions, int64_t extent) {
  return static_cast<int64_t>(positions.size()) == extent &&
         (extent == 0 || (positions[0] == 0 && is_range(positions)));
}

at::Tensor as_index(const std::vector<int64_t>& positions) {
  return at::tensor(positions, at::kLong);
}

// Maximal runs of consecutive indices in `list`.
int64_t consecutive_runs(const std::vector<int64_t>& list) {
  int64_t runs = list.empty() ? 0 : 1;
  for (size_t i = 1; i < list.size(); ++i) runs += list[i] != list[i - 1] + 1;
  return runs;
}

bool interleaves_into(const std::vector<std::vector<int64_t>>& pieces, int64_t blocks,
                      const std::vector<int64_t>& order) {
  size_t next = 0;
  for (int64_t block = 0; block < blocks; ++block) {
    for (const std::vector<int64_t>& piece : pieces) {
      if (piece.size() % blocks != 0) return false;
      const size_t run = piece.size() / blocks;
      for (size_t i = block * run; i < (block + 1) * run; ++i) {
        if (next == order.size() || order[next++] != piece[i]) return false;
      }
    }
  }
  return next == order.size();
}

}  // namespace

int64_t SharedPositions::numel() const {
  int64_t n = 1;
  for (const std::vector<int64_t>& p : held) n *= static_cast<int64_t>(p.size());
  return n;
}

SharedPositions shared_positions(const std::vector<std::vector<int64_t>>& held_lists,
                                 const std::vector<std::vector<int64_t>>& wanted_lists) {
  DTENSOR_CHECK(held_lists.size() == wanted_lists.size(),
                "redistribute: internal: layouts of different ranks (", held_lists.size(), " and ",
                wanted_lists.size(), " dims)");
  SharedPositions shared;
  shared.held.resize(held_lists.size());
  shared.wanted.resize(held_lists.size());
  for (size_t d = 0; d < held_lists.size(); ++d) {
    const std::vector<int64_t>& wanted = wanted_lists[d];
    absl::flat_hash_map<int64_t, int64_t> position_in_wanted;
    position_in_wanted.reserve(wanted.size());
    for (size_t i = 0; i < wanted.size(); ++i) position_in_wanted.emplace(wanted[i], i);
    const std::vector<int64_t>& held = held_lists[d];
    for (size_t i = 0; i < held.size(); ++i) {
      auto it = position_in_wanted.find(held[i]);
      if (it == position_in_wanted.end()) continue;
      shared.held[d].push_back(static_cast<int64_t>(i));
      shared.wanted[d].push_back(it->second);
    }
  }
  return shared;
}

std::optional<std::vector<Narrow>> box_of(const std::vector<std::vector<int64_t>>& positions,
                                          c10::IntArrayRef sizes) {
  std::vector<Narrow> narrows;
  for (size_t d = 0; d < positions.size(); ++d) {
    const std::vector<int64_t>& list = positions[d];
    if (!is_range(list)) return std::nullopt;
    const auto length = static_cast<int64_t>(list.size());
    if (length != sizes[d]) {
      narrows.push_back({static_cast<int64_t>(d), list.empty() ? 0 : list.front(), length});
    }
  }
  return narrows;
}

at::Tensor narrow_to(at::Tensor t, const std::vector<Narrow>& box) {
  // Autograd records narrows as slices, whose backward is cheaper than a
  // general view's.
  if (box.empty() || (t.requires_grad() && c10::GradMode::is_enabled())) {
    for (const Narrow& n : box) t = t.narrow(n.dim, n.start, n.length);
    return t;
  }
  // Else one view for the whole box: each narrow through the dispatcher
  // costs about as much as copying a small shard.
  std::vector<int64_t> sizes = t.sizes().vec();
  int64_t offset = t.storage_offset();
  for (const Narrow& n : box) {
    DTENSOR_CHECK(n.dim >= 0 && n.dim < t.dim() && n.start >= 0 && n.length >= 0 &&
                      n.start + n.length <= sizes[n.dim],
                  "redistribute: internal: expected a narrow within [", absl::StrJoin(sizes, ", "),
                  "], found dim ", n.dim, " from ", n.start, " for ", n.length);
    sizes[n.dim] = n.length;
    offset += n.start * t.stride(n.dim);
  }
  return t.as_strided(sizes, t.strides(), offset);
}

std::vector<int64_t> product_shape(const std::vector<std::vector<int64_t>>& positions) {
  std::vector<int64_t> shape;
  shape.reserve(positions.size());
  for (const std::vector<int64_t>& list : positions)
    shape.push_back(static_cast<int64_t>(list.size()));
  return shape;
}

at::Tensor gather_positions(const at::Tensor& local,
                            const std::vector<std::vector<int64_t>>& positions) {
  at::Tensor out = local;
  for (size_t d = 0; d < positions.size(); ++d) {
    const auto dim = static_cast<int64_t>(d);
    const std::vector<int64_t>& list = positions[d];
    if (is_identity(list, out.size(dim))) continue;
    if (!list.empty() && is_range(list)) {
      out = out.narrow(dim, list[0], static_cast<int64_t>(list.size()));  // a view, no gather
      continue;
    }
    out = out.index_select(dim, as_index(list).to(local.device()));
  }
  return pooled_contiguous(out).reshape({-1});
}

void scatter_positions(at::Tensor& out, const std::vector<std::vector<int64_t>>& positions,
                       const at::Tensor& block) {
  bool identity = true;
  for (size_t d = 0; d < positions.size(); ++d) {
    identity = identity && is_identity(positions[d], out.size(d));
  }
  if (block.numel() == 0) return;
  at::Tensor shaped = block.reshape(product_shape(positions));
  if (identity) {
    out.copy_(shaped);
    return;
  }
  // Broadcast the per-dim position lists against each other: the product.
  c10::List<c10::optional<at::Tensor>> indices;
  const int64_t ndim = static_cast<int64_t>(positions.size());
  for (int64_t d = 0; d < ndim; ++d) {
    std::vector<int64_t> view(ndim, 1);
    view[d] = -1;
    indices.push_back(as_index(positions[d]).to(out.device()).view(view));
  }
  out.index_put_(indices, shaped);
}

std::vector<std::vector<int64_t>> merged_lists(const LocalLayout& layout,
                                               const std::vector<int64_t>& global_shape,
                                               int64_t merged) {
  if (merged <= layout.merged_leading_dims) return layout.global_indices();
  int64_t rows = 1;
  for (int64_t d = 0; d < merged; ++d) {
    DTENSOR_CHECK(static_cast<int64_t>(layout.global_indices()[d].size()) == global_shape[d],
                  "redistribute: internal: merging tensor dim ", d,
                  " into rows needs all of it on every rank");
    rows *= global_shape[d];
  }
  std::vector<std::vector<int64_t>> lists(1, std::vector<int64_t>(rows));
  std::iota(lists[0].begin(), lists[0].end(), int64_t{0});
  lists.insert(lists.end(), layout.global_indices().begin() + merged,
               layout.global_indices().end());
  return lists;
}

MergedLocal merge_leading_dims(const at::Tensor& local, const LocalLayout& layout,
                               const std::vector<int64_t>& global_shape, int64_t merged) {
  MergedLocal out{local, merged_lists(layout, global_shape, merged)};
  if (merged > layout.merged_leading_dims) {
    std::vector<int64_t> shape;
    for (const std::vector<int64_t>& list : out.lists)
      shape.push_back(static_cast<int64_t>(list.size()));
    out.local = local.reshape(shape);
  }
  return out;
}

std::optional<int64_t> interleaved_block_count(const std::vector<std::vector<int64_t>>& pieces,
                                               const std::vector<int64_t>& order) {
  if (interleaves_into(pieces, 1, order)) return 1;
  for (const std::vector<int64_t>& piece : pieces) {
    if (piece.empty()) continue;
    const int64_t runs = consecutive_runs(piece);
    if (runs > 1 && interleaves_into(pieces, runs, order)) return runs;
    break;
  }
  return std::nullopt;
}

std::vector<int64_t> split_into_blocks(std::vector<int64_t> shape, int64_t dim, int64_t blocks) {
  if (blocks == 1) return shape;
  shape[dim] /= blocks;
  shape.insert(shape.begin() + dim, blocks);
  return shape;
}

}  // namespace dtensor::redistribute_internal
