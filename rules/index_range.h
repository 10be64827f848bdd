// Copyright 2026 The dtensor Authors.
//
// rules/index_range.h (<dtensor/rules/index_range.h>): the range check of
// kernels that mask indices by which rank holds them.
//
// A row-wise embedding or a vocabulary-parallel loss renumbers each index
// into its rank's block and masks the others. An index outside the whole
// range would then be masked on every rank and silently count as nothing,
// where the op on whole inputs raises. These kernels check first, and raise
// alike.
#pragma once

#include <cstdint>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace dtensor {

// Throws dtensor::Error (on CUDA: a device-side assert, as the op's own
// kernel does, without a sync) unless every element of `indices` where
// `counted` holds (every element when `counted` is undefined) is in
// [0, size). `op` and `what` name the call and the indices in the message.
void check_indices_in_range(const at::Tensor& indices, int64_t size, std::string_view op,
                            std::string_view what, const at::Tensor& counted = {});

}  // namespace dtensor
