// Copyright 2026 The dtensor Authors.
//
// A rules-layer file that includes the core layer, above it: the layering
// check and the build must both refuse it (tests/layering/CMakeLists.txt).
#include <dtensor/core/tensor_impl.h>
