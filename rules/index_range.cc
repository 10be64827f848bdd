// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/index_range.h>

#include <ATen/ATen.h>

#include <dtensor/base/check.h>

namespace dtensor {

void check_indices_in_range(const at::Tensor& indices, int64_t size, std::string_view op,
                            std::string_view what, const at::Tensor& counted) {
  if (indices.numel() == 0) return;
  at::Tensor inside = indices.ge(0).logical_and_(indices.lt(size));
  if (counted.defined()) inside.logical_or_(counted.logical_not());
  const at::Tensor valid = inside.all();
  if (indices.is_cuda()) {
    at::_assert_async(valid);
    return;
  }
  if (valid.item<bool>()) return;
  const at::Tensor checked = counted.defined() ? indices.masked_select(counted) : indices;
  DTENSOR_CHECK(false, op, ": expected every ", what, " in [0, ", size, "), found ", what,
                "s from ", checked.min().item<int64_t>(), " to ", checked.max().item<int64_t>());
}

}  // namespace dtensor
