// Copyright 2026 The dtensor Authors.
#include "placements/layout.h"

#include "dtensor/base/check.h"

namespace dtensor {

std::vector<PlacementPtr> normalize_placements(const std::vector<PlacementPtr>& placements,
                                               int64_t tensor_ndim,
                                               const std::vector<int64_t>& mesh_shape) {
  DTENSOR_CHECK(placements.size() == mesh_shape.size(), "placements: expected one per mesh dim (",
                mesh_shape.size(), "), found ", placements.size());
  std::vector<PlacementPtr> normalized;
  std::optional<int64_t> ragged_dims;
  for (size_t i = 0; i < placements.size(); ++i) {
    DTENSOR_CHECK(placements[i] != nullptr, "placements[", i,
                  "]: expected a placement, found null");
    normalized.push_back(placements[i]->normalized(tensor_ndim));
    normalized.back()->check_mesh_dim_size(mesh_shape[i]);
    const int64_t k = normalized.back()->merged_leading_dims();
    if (k == 0) continue;
    DTENSOR_CHECK(!ragged_dims || k == *ragged_dims, "placements ",
                  placements_to_string(placements),
                  ": expected every Ragged placement to merge the same leading dims, found ",
                  *ragged_dims, " and ", k);
    ragged_dims = k;
  }
  const int64_t merged = ragged_dims.value_or(1);
  for (const PlacementPtr& p : normalized) {
    const std::optional<int64_t> dim = p->split_dim();
    DTENSOR_CHECK(!dim || merged == 1 || *dim >= merged, "placements ",
                  placements_to_string(placements), ": ", p->to_string(), " splits tensor dim ",
                  *dim, ", which a Ragged placement merged into rows; expected a dim >= ", merged);
  }
  return normalized;
}

int64_t LocalLayout::local_numel() const {
  int64_t numel = 1;
  for (int64_t extent : local_shape) numel *= extent;
  return numel;
}

int64_t merged_leading_dims(const std::vector<PlacementPtr>& placements) {
  int64_t merged = 1;
  for (const PlacementPtr& p : placements) merged = std::max(merged, p->merged_leading_dims());
  return merged;
}

LocalLayout compute_local_layout(const std::vector<int64_t>& global_shape,
                                 const std::vector<int64_t>& mesh_shape,
                                 const std::vector<int64_t>& coordinate,
                                 const std::vector<PlacementPtr>& placements) {
  DTENSOR_CHECK(coordinate.size() == mesh_shape.size(), "layout: coordinate: expected ",
                mesh_shape.size(), " values, found ", coordinate.size());
  for (size_t i = 0; i < mesh_shape.size(); ++i) {
    DTENSOR_CHECK(coordinate[i] >= 0 && coordinate[i] < mesh_shape[i], "layout: coordinate[", i,
                  "]: expected a value in [0, ", mesh_shape[i], "), found ", coordinate[i]);
  }
  for (int64_t extent : global_shape) {
    DTENSOR_CHECK(extent >= 0, "layout: global shape: expected non-negative sizes, found ",
                  c10::IntArrayRef(global_shape));
  }
  const std::vector<PlacementPtr> normalized =
      normalize_placements(placements, static_cast<int64_t>(global_shape.size()), mesh_shape);
  LocalLayout layout;
  layout.merged_leading_dims = merged_leading_dims(normalized);
  LayoutIndices indices(global_shape, layout.merged_leading_dims);
  const LayoutIndices full = indices;
  for (size_t i = 0; i < normalized.size(); ++i) {
    normalized[i]->restrict(indices, mesh_shape[i], coordinate[i]);
  }
  for (size_t d = 0; d < indices.lists().size(); ++d) {
    const std::vector<int64_t>& held = indices.lists()[d];
    layout.local_shape.push_back(static_cast<int64_t>(held.size()));
    layout.global_offset.push_back(held.empty() ? static_cast<int64_t>(full.lists()[d].size())
                                                : held.front());
  }
  layout.global_indices = indices.lists();
  return layout;
}

std::pair<std::vector<int64_t>, std::vector<int64_t>> compute_local_shape_and_global_offset(
    const std::vector<int64_t>& global_shape, const DeviceMesh& mesh,
    const std::vector<PlacementPtr>& placements) {
  LocalLayout layout =
      compute_local_layout(global_shape, mesh.shape(), mesh.coordinate(), placements);
  return {std::move(layout.local_shape), std::move(layout.global_offset)};
}

}  // namespace dtensor
