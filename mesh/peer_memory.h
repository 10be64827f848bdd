// Copyright 2026 The dtensor Authors.
//
// mesh/peer_memory.h: copying bytes out of another process on the same host
// (Linux cross-memory attach, process_vm_readv) straight into a strided
// tensor, in one copy.
//
// MPI ranks on one host move large messages the same way (Open MPI's shared
// memory transport), but only between contiguous buffers: a part that lands
// strided in the output (an S(1) -> R gather's column blocks) takes a second
// pass to unpack. Reading a peer's contiguous part directly into its strided
// place saves that pass. The peer must keep the part alive and unchanged
// until the reader is done, which the caller arranges (a collective after
// the reads); reading needs the permission ptrace would need (same user, or
// CAP_SYS_PTRACE), which the caller checks once, with a probe, before
// relying on it.
//
//   const RemoteBytes part{peer_pid, peer_address, peer_bytes};
//   if (!read_peer_bytes(part, output.narrow(1, offset, length))) { /* fall back */ }
#pragma once

#include <cstdint>

#include <ATen/ATen.h>

namespace dtensor {

// `bytes` bytes at `address` in process `pid`.
struct RemoteBytes {
  int64_t pid = 0;
  uint64_t address = 0;
  int64_t bytes = 0;
};

// Copies `source` into `destination` (CPU memory, any strides, elements in
// row-major order), as if `source` were a contiguous tensor of
// destination's shape and dtype. Returns false, having written some or none
// of `destination`, when the sizes differ, when `destination` is not plain
// memory of its own (holds_plain_cpu_values in base/tensor_memory.h, and no
// two elements at one address), or when the kernel refuses or cuts short
// the read (no permission, the process gone, an address not mapped; always,
// off Linux); never throws for those, so that ranks can agree on falling
// back.
bool read_peer_bytes(const RemoteBytes& source, const at::Tensor& destination);

namespace peer_memory_internal {
// read_peer_bytes with calls of the kernel of at most `max_call_bytes` each
// (read_peer_bytes: 1 GiB, under the kernel's limit of 2 GiB less a page
// per call), splitting runs longer than that; small limits let tests reach
// the splits.
bool read_peer_bytes(const RemoteBytes& source, const at::Tensor& destination,
                     int64_t max_call_bytes);
}  // namespace peer_memory_internal

}  // namespace dtensor
