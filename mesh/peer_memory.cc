// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/peer_memory.h>

#include <sys/uio.h>
#include <unistd.h>

#include <climits>
#include <vector>

namespace dtensor {
namespace {

// The contiguous runs of `t` in row-major order: each `run_bytes` long, one
// per index of the dims before `inner_dim` (the dims from inner_dim on are
// one run in memory).
struct Runs {
  int64_t inner_dim = 0;
  int64_t run_bytes = 0;
};

Runs runs_of(const at::Tensor& t) {
  Runs runs{t.dim(), static_cast<int64_t>(t.element_size())};
  while (runs.inner_dim > 0) {
    const int64_t d = runs.inner_dim - 1;
    if (t.size(d) != 1 && t.stride(d) * t.element_size() != runs.run_bytes) break;
    runs.run_bytes *= t.size(d);
    runs.inner_dim = d;
  }
  return runs;
}

// One call of the kernel per batch of runs; false on a refused or short read.
bool read_batch(const RemoteBytes& source, int64_t offset, const std::vector<iovec>& batch,
                int64_t batch_bytes) {
  iovec remote{reinterpret_cast<void*>(source.address + static_cast<uint64_t>(offset)),
               static_cast<size_t>(batch_bytes)};
  const ssize_t read = process_vm_readv(static_cast<pid_t>(source.pid), batch.data(),
                                        static_cast<unsigned long>(batch.size()), &remote, 1, 0);
  return read == batch_bytes;
}

}  // namespace

bool read_peer_bytes(const RemoteBytes& source, const at::Tensor& destination) {
  if (!destination.is_cpu() ||
      source.bytes != static_cast<int64_t>(destination.numel()) * destination.element_size()) {
    return false;
  }
  if (source.bytes == 0) return true;
  const Runs runs = runs_of(destination);
  const auto batch_limit = static_cast<size_t>(IOV_MAX);
  std::vector<iovec> batch;
  batch.reserve(batch_limit);
  int64_t offset = 0, batch_bytes = 0;
  // Odometer over the dims before inner_dim.
  std::vector<int64_t> index(static_cast<size_t>(runs.inner_dim), 0);
  char* const base = static_cast<char*>(destination.data_ptr());
  const int64_t element = destination.element_size();
  while (true) {
    int64_t at = 0;
    for (int64_t d = 0; d < runs.inner_dim; ++d) at += index[d] * destination.stride(d) * element;
    batch.push_back({base + at, static_cast<size_t>(runs.run_bytes)});
    batch_bytes += runs.run_bytes;
    if (batch.size() == batch_limit) {
      if (!read_batch(source, offset, batch, batch_bytes)) return false;
      offset += batch_bytes;
      batch.clear();
      batch_bytes = 0;
    }
    int64_t d = runs.inner_dim - 1;
    while (d >= 0 && ++index[d] == destination.size(d)) index[d--] = 0;
    if (d < 0) break;
  }
  return batch.empty() || read_batch(source, offset, batch, batch_bytes);
}

}  // namespace dtensor
