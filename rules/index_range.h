// Copyright 2026 The dtensor Authors.
//
// rules/index_range.h (<dtensor/rules/index_range.h>): the range check of
// kernels that mask indices by which rank holds them.
//
// A row-wise embedding or a vocabulary-parallel loss renumbers each index
// into its rank's block and masks the others. An index outside the whole
// range would then be masked on every rank and silently count as nothing,
// where the op on whole inputs raises. These kernels check first, and raise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <ATen/core/Tensor.h>

namespace dtensor {

// What is wrong when some element of `indices` where `counted` holds (every
// element when `counted` is undefined) is outside [0, size), as an error
// message naming the call `op` and the indices `what`; nullopt when all are
// inside. On CUDA it queues a device-side assert instead, as the op's own
// kernel does, without a sync, and returns nullopt.
std::optional<std::string> indices_out_of_range(const at::Tensor& indices, int64_t size,
                                                std::string_view op, std::string_view what,
                                                const at::Tensor& counted = {});

// Throws dtensor::Error with that message, if any.
void check_indices_in_range(const at::Tensor& indices, int64_t size, std::string_view op,
                            std::string_view what, const at::Tensor& counted = {});

}  // namespace dtensor
