// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/async_redistribute.h: redistribute without holding up
// the caller's CUDA stream (`RedistributeOptions::async_op`).
//
// On a mesh of CUDA devices the whole redistribute is enqueued on a side
// stream that first waits for the caller's current stream, so kernels the
// caller enqueues next overlap with the collectives. The call returns as soon
// as everything is enqueued; the result and the source carry a PendingWork
// (pending_work.h) that their first use waits for on the device. Tensors the
// caller took out of the source with to_local() *before* the call are read by
// the side stream: do not write them until the result has been used.
//
// On other meshes (local, MPI: no streams) it is redistribute_any: the work
// is complete on return and nothing is attached.
#pragma once

#include <vector>

#include "dtensor/dtensor.h"

namespace dtensor {

DTensor redistribute_async(const DTensor& tensor, const std::vector<PlacementPtr>& placements);

}  // namespace dtensor
