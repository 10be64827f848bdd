// Copyright 2026 The dtensor Authors.
#include "tests/support/layout_reference.h"

#include <sstream>

#include <ATen/ATen.h>

#include <dtensor/placements/layout.h>

namespace dtensor::testing {

at::Tensor expected_local(const at::Tensor& global, const DeviceMesh& mesh,
                          const std::vector<PlacementPtr>& placements) {
  const std::vector<PlacementPtr> normalized =
      normalize_placements(placements, global.dim(), mesh.shape());
  const LocalLayout layout =
      compute_local_layout(global.sizes().vec(), mesh.shape(), mesh.coordinate(), normalized);
  at::Tensor t = global;
  if (layout.merged_leading_dims > 1) t = t.flatten(0, layout.merged_leading_dims - 1);
  for (size_t d = 0; d < layout.global_indices().size(); ++d) {
    t = t.index_select(static_cast<int64_t>(d), at::tensor(layout.global_indices()[d], at::kLong));
  }
  for (size_t m = 0; m < normalized.size(); ++m) {
    const std::optional<ReduceOp> op = normalized[m]->partial_op();
    if (!op || mesh.coordinate()[m] == 0) continue;
    if (*op == ReduceOp::kSum || *op == ReduceOp::kBxor) t = at::zeros_like(t);
    if (*op == ReduceOp::kProduct) t = at::ones_like(t);
  }
  return t.contiguous();
}

std::string describe_counts(const CollectiveCounter& counter) {
  std::ostringstream out;
  out << "{";
  for (const auto& [name, n] : counter.by_collective()) out << " " << name << ":" << n;
  out << " }";
  return out.str();
}

}  // namespace dtensor::testing
