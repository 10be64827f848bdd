// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/reduce_terms.h>

#include <dtensor/placements/partial.h>
#include <dtensor/placements/replicate.h>
#include <dtensor/redistribute/planner.h>

namespace dtensor {

at::Tensor reduce_terms(const at::Tensor& term, const DeviceMesh& mesh,
                        const std::vector<int64_t>& mesh_dims, ReduceOp op) {
  if (mesh_dims.empty()) return term;
  std::vector<PlacementPtr> placements(mesh.ndim(), Replicate::make());
  for (int64_t m : mesh_dims) placements[m] = Partial::make(op);
  const DTensorSpec terms(mesh, placements, term.sizes().vec(), term.scalar_type());
  const RedistributePlanPtr plan =
      plan_redistribute(terms, std::vector<PlacementPtr>(mesh.ndim(), Replicate::make()));
  return execute_plan(*plan, term);
}

}  // namespace dtensor
