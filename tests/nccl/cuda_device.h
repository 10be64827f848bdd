// Copyright 2026 The dtensor Authors.
//
// tests/nccl/cuda_device.h: whether this process sees a CUDA device, so the
// NCCL suites skip cleanly (GTEST_SKIP) on machines without one.
#pragma once

#include <cuda_runtime_api.h>

namespace dtensor::testing {

inline bool has_cuda_device() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

}  // namespace dtensor::testing
