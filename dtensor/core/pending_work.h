// Copyright 2026 The dtensor Authors.
//
// dtensor/core/pending_work.h (<dtensor/core/pending_work.h>): device work an async redistribute
// left running, attached to the DTensors it reads and writes.
//
// `redistribute(placements, {.async_op = true})` on a CUDA mesh returns while
// its collectives still run on a side stream. The result, and the source it
// reads, carry a PendingWork; the first access to either one's local tensor
// (to_local, any op, full_tensor, another redistribute) calls `wait`, which
// makes the then-current stream wait for the work on the device (the host
// never blocks), after which the tensor behaves like one produced on that
// stream. Backends without streams complete the work inside the call and
// attach nothing.
#pragma once

#include <ATen/core/Tensor.h>

namespace dtensor {

class PendingWork {
 public:
  virtual ~PendingWork() = default;
  // Orders the caller's current stream after the work and hands `local` (the
  // tensor about to be used) to that stream for the memory allocator.
  virtual void wait(const at::Tensor& local) const = 0;
  // Whether the device has finished the work (a query; never blocks).
  virtual bool ready() const = 0;
};

}  // namespace dtensor
