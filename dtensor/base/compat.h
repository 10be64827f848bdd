// Copyright 2026 The dtensor Authors.
//
// dtensor/base/compat.h: every difference between the libtorch versions
// dtensor builds against (Debian's 1.13 and 2.x) lives here, and only here.
//
// Code elsewhere asks `DTENSOR_TORCH_AT_LEAST(major, minor)` or uses one of
// the helpers below instead of spelling a version-specific API.
#pragma once

#include <torch/version.h>

#define DTENSOR_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||          \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
