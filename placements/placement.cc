// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/placement.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <utility>
#include <vector>

#include <dtensor/base/check.h>
#include "absl/hash/hash.h"

namespace dtensor {

std::vector<int64_t> split_tensor_dims(const Placement& p) {
  std::vector<int64_t> dims;
  if (std::optional<int64_t> d = p.split_dim()) dims.push_back(*d);
  for (int64_t d = 0; d < p.merged_leading_dims(); ++d) dims.push_back(d);
  return dims;
}

std::optional<int64_t> split_dim_of(const Placement& p) {
  if (p.merged_leading_dims() > 0) return 0;
  return p.split_dim();
}

bool splits_tensor_dim(const Placement& p, int64_t dim) {
  const int64_t merged = p.merged_leading_dims();
  return merged > 0 ? dim < merged : p.split_dim() == dim;
}

std::string Placement::kind() const {
  const std::string spelling = to_string();
  return spelling.substr(0, spelling.find('('));
}

LayoutIndices::LayoutIndices(const std::vector<int64_t>& global_shape, int64_t merged)
    : tensor_ndim_(static_cast<int64_t>(global_shape.size())),
      merged_(std::max<int64_t>(merged, 1)) {
  DTENSOR_CHECK(merged_ <= std::max<int64_t>(tensor_ndim_, 1), "layout: expected at most ",
                tensor_ndim_, " leading dims to merge for a ", tensor_ndim_, "-D tensor, found ",
                merged_);
  for (int64_t extent : extents(global_shape, merged_)) {
    lists_.emplace_back(extent);
    std::iota(lists_.back().begin(), lists_.back().end(), int64_t{0});
  }
}

std::vector<int64_t> LayoutIndices::extents(const std::vector<int64_t>& global_shape,
                                            int64_t merged) {
  if (global_shape.empty()) return {};
  const auto rows_end = global_shape.begin() + std::max<int64_t>(merged, 1);
  std::vector<int64_t> out = {
      std::accumulate(global_shape.begin(), rows_end, int64_t{1}, std::multiplies<int64_t>())};
  out.insert(out.end(), rows_end, global_shape.end());
  return out;
}

int64_t LayoutIndices::list_of(int64_t dim) const {
  DTENSOR_CHECK(dim >= 0 && dim < tensor_ndim_, "layout: expected a tensor dim in [0, ",
                tensor_ndim_, "), found ", dim);
  DTENSOR_CHECK(merged_ == 1 || dim >= merged_, "layout: tensor dim ", dim,
                " is merged into the rows of a Ragged placement over the leading ", merged_,
                " dims; expected a placement to split a dim >= ", merged_);
  return dim == 0 ? 0 : dim - merged_ + 1;
}

std::vector<int64_t>& LayoutIndices::along(int64_t dim) { return lists_[list_of(dim)]; }

const std::vector<int64_t>& LayoutIndices::along(int64_t dim) const { return lists_[list_of(dim)]; }

bool same_placements(const std::vector<PlacementPtr>& a, const std::vector<PlacementPtr>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](const PlacementPtr& x, const PlacementPtr& y) {
                                              return x == y || *x == *y;
                                            });
}

std::string placements_to_string(const std::vector<PlacementPtr>& placements) {
  std::string out;
  for (size_t i = 0; i < placements.size(); ++i) {
    if (i) out += ",";
    out += placements[i]->to_string();
  }
  return out;
}

size_t PlacementListHash::operator()(const std::vector<PlacementPtr>& placements) const {
  size_t h = placements.size();
  for (const PlacementPtr& p : placements) h = absl::HashOf(h, p->hash());
  return h;
}

ChunkRange torch_chunk_range(int64_t length, int64_t n, int64_t r) {
  // Written so that no intermediate overflows for lengths near INT64_MAX.
  const int64_t chunk = n == 0 ? 0 : length / n + (length % n != 0);
  const int64_t begin = std::min(length, chunk * r);
  return {begin, begin + std::min(chunk, length - begin)};
}

void keep_range(std::vector<int64_t>& indices, ChunkRange range) {
  indices.erase(indices.begin() + range.end, indices.end());
  indices.erase(indices.begin(), indices.begin() + range.begin);
}

int64_t count_held(const RangeList& ranges) {
  int64_t n = 0;
  for (const ChunkRange& range : ranges) n += range.end - range.begin;
  return n;
}

void keep_pieces(std::vector<int64_t>& indices, const RangeList& pieces) {
  std::vector<int64_t> kept;
  for (const ChunkRange& piece : pieces) {
    kept.insert(kept.end(), indices.begin() + piece.begin, indices.begin() + piece.end);
  }
  indices = std::move(kept);
}

}  // namespace dtensor
