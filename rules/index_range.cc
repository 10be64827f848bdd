// Copyright 2026 The dtensor Authors.
#include <dtensor/rules/index_range.h>

#include <ATen/ATen.h>

#include <sstream>

#include <dtensor/base/check.h>

namespace dtensor {

std::optional<std::string> indices_out_of_range(const at::Tensor& indices, int64_t size,
                                                std::string_view op, std::string_view what,
                                                const at::Tensor& counted) {
  if (indices.numel() == 0) return std::nullopt;
  at::Tensor inside = indices.ge(0).logical_and_(indices.lt(size));
  if (counted.defined()) inside.logical_or_(counted.logical_not());
  const at::Tensor valid = inside.all();
  if (indices.is_cuda()) {
    at::_assert_async(valid);
    return std::nullopt;
  }
  if (valid.item<bool>()) return std::nullopt;
  const at::Tensor checked = counted.defined() ? indices.masked_select(counted) : indices;
  std::ostringstream message;
  message << op << ": expected every " << what << " in [0, " << size << "), found " << what
          << "s from " << checked.min().item<int64_t>() << " to " << checked.max().item<int64_t>();
  return message.str();
}

void check_indices_in_range(const at::Tensor& indices, int64_t size, std::string_view op,
                            std::string_view what, const at::Tensor& counted) {
  const std::optional<std::string> problem = indices_out_of_range(indices, size, op, what, counted);
  DTENSOR_CHECK(!problem, *problem);
}

}  // namespace dtensor
