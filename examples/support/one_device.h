// Copyright 2026 The dtensor Authors.
//
// examples/support/one_device.h: comparing what the distributed examples
// compute with the same computation on one device.
#pragma once

#include <ATen/core/Tensor.h>

namespace dtensor::examples {

// Largest |a - b| over the elements. Either side may be a DTensor, compared
// through its full_tensor (collective then: every rank of its mesh calls it).
double max_abs_diff(const at::Tensor& a, const at::Tensor& b);

}  // namespace dtensor::examples
