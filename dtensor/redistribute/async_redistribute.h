// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/async_redistribute.h
// (<dtensor/redistribute/async_redistribute.h>): redistribute without holding
// up the caller's CUDA stream (`RedistributeOptions::async_op`).
//
// On a mesh of CUDA devices the whole redistribute is enqueued on a side
// stream that first waits for the caller's current stream, so kernels the
// caller enqueues next overlap with the collectives. The call returns as soon
// as everything is enqueued; the result and the source carry a PendingWork
// (dtensor/core/pending_work.h) that their first use waits for on the device. Tensors the
// caller took out of the source with to_local() *before* the call are read by
// the side stream: do not write them until the result has been used.
//
// On other meshes (local, MPI: no streams) it runs the redistribute: the work
// is complete on return and nothing is attached.
#pragma once

#include <functional>

#include <ATen/core/Tensor.h>

namespace dtensor {

// Runs `redistribute` (which returns `source`, a DTensor, laid out anew, or
// `source` itself when nothing moves) on a side stream of the mesh's device,
// and marks the result and `source` as pending until that stream is done.
at::Tensor redistribute_async(const at::Tensor& source,
                              const std::function<at::Tensor()>& redistribute);

}  // namespace dtensor
