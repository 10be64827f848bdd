// Copyright 2026 The dtensor Authors.
//
// mesh/peer_memory.h: copying values between this process and another on
// the same host (Linux cross-memory attach, process_vm_readv and
// process_vm_writev), from where they lie to where they go, strided on
// either side, in one copy.
//
// MPI ranks on one host move large messages the same way (Open MPI's shared
// memory transport), but only between contiguous buffers: a part that lies
// strided in the sender (an S(0) -> S(1) exchange's column blocks) or lands
// strided in the output (an S(1) -> R gather's) takes a pack or an unpack
// pass. Copying the part straight from or into its place saves that pass.
// The kernel pins the other process's pages once per remote run, so keep
// the remote side the one of long runs: read a peer's contiguous part into
// a strided place, write a strided part into a peer's contiguous place. The
// peer must keep its memory alive (and unchanged, or untouched) until the
// copy is done, which the caller arranges (a collective after it); copying
// needs the permission ptrace would need (same user, or CAP_SYS_PTRACE),
// which the caller checks once, with a probe, before relying on it.
//
//   const RemoteBytes part{peer_pid, peer_address, peer_bytes};
//   if (!read_peer_bytes(part, output.narrow(1, offset, length))) { /* fall back */ }
//   const RemoteTensor place{peer_pid, peer_address + offset_bytes, {width, 1}};
//   if (!write_peer_tensor(input.narrow(1, column, width), place)) { /* fall back */ }
#pragma once

#include <cstdint>
#include <vector>

#include <ATen/ATen.h>

namespace dtensor {

// `bytes` bytes at `address` in process `pid`.
struct RemoteBytes {
  int64_t pid = 0;
  uint64_t address = 0;
  int64_t bytes = 0;
};

// A strided tensor's memory in process `pid`, of the shape and dtype of the
// local tensor it is copied from or into: the element at index i lies at
// `address + element_size * sum_d(i[d] * strides[d])`.
struct RemoteTensor {
  int64_t pid = 0;
  uint64_t address = 0;
  std::vector<int64_t> strides;  // in elements, one per dim, none negative
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

// Copies `source` into `destination`, element by element, as read_peer_bytes
// does; also false when `source.strides` has not one stride per dim of
// `destination` or has a negative one.
bool read_peer_tensor(const RemoteTensor& source, const at::Tensor& destination);

// Copies `source` (CPU memory, any strides, values as stored) into
// `destination` in the other process, element by element. Returns false,
// having written some or none of `destination`, when `destination.strides`
// has not one stride per dim of `source`, has a negative one or places two
// elements at one address, when `source` is not plain memory, or when the
// kernel refuses or cuts short the write; never throws for those.
bool write_peer_tensor(const at::Tensor& source, const RemoteTensor& destination);

namespace peer_memory_internal {
// read_peer_tensor and write_peer_tensor with calls of the kernel of at most
// `max_call_bytes` each (otherwise 1 GiB, under the kernel's limit of 2 GiB
// less a page per call), splitting runs longer than that; small limits let
// tests reach the splits.
bool read_peer_tensor(const RemoteTensor& source, const at::Tensor& destination,
                      int64_t max_call_bytes);
bool write_peer_tensor(const at::Tensor& source, const RemoteTensor& destination,
                       int64_t max_call_bytes);
}  // namespace peer_memory_internal

}  // namespace dtensor
