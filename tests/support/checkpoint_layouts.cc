// Copyright 2026 The dtensor Authors.
#include "tests/support/checkpoint_layouts.h"

#include <ATen/ATen.h>

#include <dtensor/dtensor.h>
#include <dtensor/placements/placements.h>

namespace dtensor::testing {

at::Tensor checkpoint_reference(const std::vector<int64_t>& shape, c10::ScalarType dtype) {
  int64_t numel = 1;
  for (const int64_t size : shape) numel *= size;
  at::Tensor values = at::arange(numel, at::kLong).sub(numel / 2);
  if (dtype == at::kLong) return values.mul(int64_t{1'000'000'007}).reshape(shape);
  return values.to(at::kDouble).mul(0.25).to(dtype).reshape(shape);
}

at::Tensor lay_out(const at::Tensor& global, const DeviceMesh& mesh,
                   const std::string& placements) {
  if (placements == "plain") return global.clone();
  const std::vector<PlacementPtr> parsed = parse_placements(placements);
  std::vector<PlacementPtr> replicated;
  bool zero = false;
  for (size_t d = 0; d < parsed.size(); ++d) {
    replicated.push_back(parsed[d]->is_partial() ? Replicate::make() : parsed[d]);
    zero = zero || (parsed[d]->is_partial() && mesh.coordinate()[d] != 0);
  }
  at::Tensor local = distribute_tensor(global, mesh, replicated).to_local().clone();
  if (zero) local.zero_();
  FromLocalOptions options;
  options.shape = global.sizes().vec();
  return from_local(local, mesh, parsed, options).tensor();
}

at::Tensor local_of(const at::Tensor& tensor) {
  return is_dtensor(tensor) ? DTensor(tensor).to_local() : tensor;
}

}  // namespace dtensor::testing
