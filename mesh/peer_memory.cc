// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/peer_memory.h>

#include <algorithm>
#include <climits>
#include <utility>
#include <vector>

#include <dtensor/base/tensor_memory.h>

#include <sys/uio.h>

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

// The kernel reads at most MAX_RW_COUNT (2 GiB less a page) per call and
// IOV_MAX pieces: batches stay under both.
constexpr int64_t kMaxCallBytes = int64_t{1} << 30;

// Local pieces gathered into calls of the kernel, each reading the next
// bytes of the source; `ok` turns false at the first refused or short read.
class BatchedRead {
 public:
  BatchedRead(const RemoteBytes& source, int64_t max_call_bytes)
      : source_(source), max_call_bytes_(max_call_bytes) {
    pieces_.reserve(static_cast<size_t>(IOV_MAX));
  }

  void add(char* at, int64_t bytes) {
    while (bytes > 0 && ok_) {
      const int64_t take = std::min(bytes, max_call_bytes_ - batch_bytes_);
      pieces_.push_back({at, static_cast<size_t>(take)});
      batch_bytes_ += take;
      at += take;
      bytes -= take;
      if (pieces_.size() == static_cast<size_t>(IOV_MAX) || batch_bytes_ == max_call_bytes_) {
        flush();
      }
    }
  }

  bool finish() {
    if (!pieces_.empty()) flush();
    return ok_;
  }

 private:
  void flush() {
#ifdef __linux__
    iovec remote{reinterpret_cast<void*>(source_.address + static_cast<uint64_t>(offset_)),
                 static_cast<size_t>(batch_bytes_)};
    const ssize_t read =
        process_vm_readv(static_cast<pid_t>(source_.pid), pieces_.data(),
                         static_cast<unsigned long>(pieces_.size()), &remote, 1, 0);
    ok_ = ok_ && read == batch_bytes_;
#else
    ok_ = false;
#endif
    offset_ += batch_bytes_;
    batch_bytes_ = 0;
    pieces_.clear();
  }

  const RemoteBytes& source_;
  const int64_t max_call_bytes_;
  std::vector<iovec> pieces_;
  int64_t offset_ = 0;
  int64_t batch_bytes_ = 0;
  bool ok_ = true;
};

// Whether no two elements of `t` share an address: with its dims of more
// than one index in rising stride order, each stride passes the farthest
// offset the dims before it reach. (ATen's has_internal_overlap gives up on
// most views that are not contiguous, the narrows a gather writes into.)
bool elements_apart(const at::Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size)
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return false;
    reach += stride * (size - 1);
  }
  return true;
}

// Whether `t` is memory the bytes can go straight into: values as stored,
// and each element at its own address.
bool is_plain_destination(const at::Tensor& t) {
  return t.defined() && holds_plain_cpu_values(t) && t.has_storage() && elements_apart(t);
}

}  // namespace

bool read_peer_bytes(const RemoteBytes& source, const at::Tensor& destination) {
  return peer_memory_internal::read_peer_bytes(source, destination, kMaxCallBytes);
}

namespace peer_memory_internal {

bool read_peer_bytes(const RemoteBytes& source, const at::Tensor& destination,
                     int64_t max_call_bytes) {
  if (max_call_bytes <= 0 || !is_plain_destination(destination) ||
      source.bytes != static_cast<int64_t>(destination.numel()) * destination.element_size()) {
    return false;
  }
  if (source.bytes == 0) return true;
  const Runs runs = runs_of(destination);
  BatchedRead read(source, max_call_bytes);
  // Odometer over the dims before inner_dim, moving the run's address along.
  std::vector<int64_t> index(static_cast<size_t>(runs.inner_dim), 0);
  const int64_t element = destination.element_size();
  char* at = static_cast<char*>(destination.data_ptr());
  while (true) {
    read.add(at, runs.run_bytes);
    int64_t d = runs.inner_dim - 1;
    for (; d >= 0 && index[d] + 1 == destination.size(d); --d) {
      at -= index[d] * destination.stride(d) * element;
      index[d] = 0;
    }
    if (d < 0) break;
    ++index[d];
    at += destination.stride(d) * element;
  }
  return read.finish();
}

}  // namespace peer_memory_internal
}  // namespace dtensor
