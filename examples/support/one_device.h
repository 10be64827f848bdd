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

// Whether a distributed step's loss matches one device's. Float32 sums taken
// in another order differ by round-off that grows with the loss, hence a
// relative part beside the absolute one. False for NaN: every caller's
// comparison is written `x <= tolerance` so that NaN counts as a mismatch.
bool loss_matches(double loss, double reference, double absolute_tolerance = 1e-5,
                  double relative_tolerance = 1e-5);

}  // namespace dtensor::examples
