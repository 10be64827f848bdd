// Copyright 2026 The dtensor Authors.
//
// A rules-layer file that reaches for a communicator: rules see a mesh's
// shape and names, never its communicators, so the layering check and the
// build must both refuse it (tests/layering/CMakeLists.txt).
#include <dtensor/mesh/communicator.h>
