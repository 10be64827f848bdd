// Copyright 2026 The dtensor Authors.
#include <dtensor/placements/spec.h>

#include <algorithm>
#include <sstream>

#include <dtensor/base/check.h>
#include "absl/base/call_once.h"
#include "absl/hash/hash.h"
#include "absl/strings/str_join.h"

namespace dtensor {

struct DTensorSpec::MinLocalSizes {
  absl::once_flag once;
  std::vector<int64_t> sizes;
};

namespace {

// Whether the byte count (numel times `element_size`) and the row-major
// strides of non-negative `shape` fit in int64: everything downstream
// multiplies sizes unchecked.
bool bytes_and_strides_fit(const std::vector<int64_t>& shape, int64_t element_size) {
  const bool empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
  int64_t bytes = element_size, stride = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (!empty && __builtin_mul_overflow(bytes, shape[d], &bytes)) return false;
    if (d > 0 && __builtin_mul_overflow(stride, std::max<int64_t>(shape[d], 1), &stride)) {
      return false;
    }
  }
  return true;
}

}  // namespace

DTensorSpec::DTensorSpec(DeviceMesh mesh, std::vector<PlacementPtr> placements,
                         std::vector<int64_t> shape, c10::ScalarType dtype)
    : mesh_(std::move(mesh)), shape_(std::move(shape)), dtype_(dtype) {
  for (int64_t extent : shape_) {
    DTENSOR_CHECK(extent >= 0, "DTensor shape: expected non-negative sizes, found [",
                  absl::StrJoin(shape_, ", "), "]");
  }
  DTENSOR_CHECK(bytes_and_strides_fit(shape_, static_cast<int64_t>(c10::elementSize(dtype_))),
                "DTensor shape: expected sizes whose strides and product in bytes fit in 64 bits, ",
                "found [", absl::StrJoin(shape_, ", "), "] of ", dtype_);
  placements_ = normalize_placements(placements, ndim(), mesh_.shape());
  for (const PlacementPtr& p : placements_) {
    // Spelled only for the error: a spec is made on every first call and
    // planner state.
    std::optional<ReduceOp> op = p->partial_op();
    if (op && !reduce_op_supports(*op, dtype_))
      check_reduce_op_supports(*op, dtype_, p->to_string());
  }
  if (mesh_.contains_calling_rank()) local_layout_ = layout_at(mesh_.coordinate());
  min_local_sizes_ = std::make_shared<MinLocalSizes>();
  hash_ = absl::HashOf(shape_, static_cast<int>(dtype_), PlacementListHash()(placements_), mesh_);
}

std::vector<int64_t> DTensorSpec::stride() const {
  std::vector<int64_t> strides(shape_.size(), 1);
  for (int64_t d = ndim() - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * std::max<int64_t>(shape_[d + 1], 1);
  return strides;
}

int64_t DTensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t extent : shape_) n *= extent;
  return n;
}

DTensorSpec DTensorSpec::with_placements(std::vector<PlacementPtr> placements) const {
  return DTensorSpec(mesh_, std::move(placements), shape_, dtype_);
}

LocalLayout DTensorSpec::layout_at(const std::vector<int64_t>& coordinate) const {
  return compute_normalized_local_layout(shape_, mesh_.shape(), coordinate, placements_);
}

const std::vector<int64_t>& DTensorSpec::min_local_sizes() const {
  absl::call_once(min_local_sizes_->once, [this] {
    // Only mesh dims that split something change what a rank holds: walk
    // their coordinates, the others fixed at 0.
    std::vector<int64_t> splitting_extents(placements_.size(), 1);
    for (size_t m = 0; m < placements_.size(); ++m) {
      if (split_dim_of(*placements_[m])) {
        splitting_extents[m] = mesh_.size(static_cast<int64_t>(m));
      }
    }
    std::vector<int64_t>& sizes = min_local_sizes_->sizes;
    for_each_grid_coordinate(splitting_extents, [&](const std::vector<int64_t>& coordinate) {
      const std::vector<int64_t> local = layout_at(coordinate).local_shape;
      if (sizes.empty()) sizes = local;
      for (size_t d = 0; d < sizes.size(); ++d) sizes[d] = std::min(sizes[d], local[d]);
    });
  });
  return min_local_sizes_->sizes;
}

bool DTensorSpec::has_partial() const {
  for (const PlacementPtr& p : placements_) {
    if (p->is_partial()) return true;
  }
  return false;
}

std::string DTensorSpec::to_string() const {
  std::ostringstream out;
  out << "[" << absl::StrJoin(shape_, ", ") << "] " << dtype_ << " as "
      << placements_to_string(placements_) << " on " << mesh_.to_string();
  return out.str();
}

bool operator==(const DTensorSpec& a, const DTensorSpec& b) {
  if (&a == &b) return true;
  return a.hash_ == b.hash_ && a.shape_ == b.shape_ && a.dtype_ == b.dtype_ &&
         same_placements(a.placements_, b.placements_) && a.mesh_ == b.mesh_;
}

}  // namespace dtensor
