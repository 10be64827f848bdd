// Copyright 2026 The dtensor Authors.
//
// base/buffer_pool.h (<dtensor/base/buffer_pool.h>): a bounded, process-wide
// cache of CPU memory blocks behind the tensors redistribute and the
// communicators allocate.
//
// Why: a fresh multi-MiB CPU tensor costs more than the collective that fills
// it. glibc serves large requests with mmap and unmaps them on free, so every
// call page-faults its output in again (about 20 µs per 4 KiB page on the
// 2-core benchmark machine: a 256 MiB all-gather took 4.4x its raw collective
// before this pool). CUDA tensors need none of this: libtorch's caching
// allocator keeps device memory already.
//
// How: `pooled_empty` is `at::empty` for contiguous CPU tensors. The block
// behind the tensor returns to the pool when the last tensor or view of it
// dies, on whatever thread, at whatever time (after main returned too), and
// the next request of a similar size takes it back, its pages already mapped
// (one the asking thread returned itself first: its cache may still hold it).
//
//   at::Tensor output = pooled_empty(shape, local.options());
//   communicator.all_gather(local, output);
//   return output;  // its block returns to the pool when the caller drops it
//
// Sizes are rounded up to one of four classes per power of two (at most 25%
// more), so requests of nearby sizes share blocks. Any other device, layout
// or pinned memory gets `at::empty`.
//
// Bound: the pool keeps at most `buffer_pool_capacity()` bytes of idle
// blocks; a block returning to a full pool first evicts (frees) the blocks
// returned least recently, and one larger than the whole capacity is freed.
// Blocks in use are the callers' tensors and are not counted. The default is
// an eighth of the machine's physical memory, at most 8 GiB, per process;
// the environment variable DTENSOR_BUFFER_POOL_CAPACITY (bytes, read at first
// use) or `set_buffer_pool_capacity` say otherwise, and 0 turns caching off.
// `release_cached_buffers` frees every idle block now. Thread-safe.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>
#include <c10/util/ArrayRef.h>

namespace dtensor {

// A new contiguous tensor of `shape` and `options` with unspecified values,
// as `at::empty`; on the CPU its memory comes from the buffer pool. Its
// storage is resizable: growing it moves the data to libtorch's allocator
// and returns the block.
at::Tensor pooled_empty(c10::IntArrayRef shape, const at::TensorOptions& options);

// A contiguous copy of `tensor` in a `pooled_empty` tensor.
at::Tensor pooled_clone(const at::Tensor& tensor);
// `tensor` itself when it is contiguous, else `pooled_clone(tensor)`: as
// `Tensor::contiguous`.
at::Tensor pooled_contiguous(const at::Tensor& tensor);

// The most bytes of idle blocks the pool keeps (see the header comment).
int64_t buffer_pool_capacity();
// Throws dtensor::Error unless `bytes` is at least 0; evicts the idle blocks
// returned least recently beyond it. 0 turns caching off.
void set_buffer_pool_capacity(int64_t bytes);

// Frees every idle block. Blocks in use are unaffected: they return to the
// pool when their tensors die.
void release_cached_buffers();

// What the pool holds and has done, since the process started.
struct BufferPoolStats {
  int64_t capacity_bytes = 0;  // buffer_pool_capacity()
  int64_t cached_bytes = 0;    // idle blocks, never more than capacity_bytes
  int64_t cached_blocks = 0;
  int64_t in_use_bytes = 0;  // blocks behind live tensors
  int64_t hits = 0;          // requests served by an idle block
  int64_t misses = 0;        // requests that allocated a new block
};
BufferPoolStats buffer_pool_stats();

}  // namespace dtensor
