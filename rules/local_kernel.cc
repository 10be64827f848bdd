// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/local_kernel.h>

#include <dtensor/base/check.h>
#include <dtensor/rules/propagation.h>
#include <dtensor/rules/strategy.h>

namespace dtensor {

const std::vector<int64_t>& local_output_shape(const LocalContext& context, size_t k,
                                               c10::ScalarType dtype) {
  const std::vector<int64_t>& shape = context.propagation().output_shapes[k];
  DTENSOR_CHECK(!has_kernel_sized_dims(shape), context.call().op_name(), ": output ", k,
                " is sized by its kernel; expected an output whose shape the rule gives");
  return context.propagation().output_spec(k, dtype, context.mesh())->local_layout().local_shape;
}

std::vector<int64_t> mesh_dims_splitting(const LocalContext& context, size_t i,
                                         const std::function<bool(int64_t dim)>& counts) {
  std::vector<int64_t> dims;
  const auto& placements = context.propagation().input_targets[i]->placements();
  for (size_t m = 0; m < placements.size(); ++m) {
    const std::optional<int64_t> dim = split_dim_of(*placements[m]);
    if (dim && counts(*dim)) dims.push_back(static_cast<int64_t>(m));
  }
  return dims;
}

}  // namespace dtensor
