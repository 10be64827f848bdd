// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/peer_memory.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>
#include <vector>

#include <c10/util/strides.h>

#include <dtensor/base/tensor_memory.h>

#include <sys/uio.h>

namespace dtensor {
namespace {

// The runs of bytes contiguous on both sides, in row-major order: each
// `run_bytes` long, one per index of the dims before `inner_dim` (the dims
// from inner_dim on are one run on both sides).
struct Runs {
  int64_t inner_dim = 0;
  int64_t run_bytes = 0;
};

Runs runs_of(const at::Tensor& local, const std::vector<int64_t>& remote_strides) {
  const int64_t element = static_cast<int64_t>(local.element_size());
  Runs runs{local.dim(), element};
  while (runs.inner_dim > 0) {
    const int64_t d = runs.inner_dim - 1;
    const bool continues = local.stride(d) * element == runs.run_bytes &&
                           remote_strides[d] * element == runs.run_bytes;
    if (local.size(d) != 1 && !continues) break;
    runs.run_bytes *= local.size(d);
    runs.inner_dim = d;
  }
  return runs;
}

// The kernel moves at most MAX_RW_COUNT (2 GiB less a page) per call and
// IOV_MAX pieces on each side: batches stay under all three. It pins the
// remote pages once per remote piece, so a side of many short pieces is
// cheap only as the local one (S(0) -> S(1) blocks of 256-byte rows, 4
// ranks: 2.7 ms read from strided remote rows, 0.4 ms through MPI).
constexpr int64_t kMaxCallBytes = int64_t{1} << 30;

// The pieces of one call of the kernel on one side, a piece that continues
// the last one extending it (a contiguous source is one piece per call).
class Pieces {
 public:
  Pieces() { pieces_.reserve(static_cast<size_t>(IOV_MAX)); }

  void add(uintptr_t at, int64_t bytes) {
    if (!pieces_.empty() &&
        reinterpret_cast<uintptr_t>(pieces_.back().iov_base) + pieces_.back().iov_len == at) {
      pieces_.back().iov_len += static_cast<size_t>(bytes);
    } else {
      pieces_.push_back({reinterpret_cast<void*>(at), static_cast<size_t>(bytes)});
    }
  }
  bool full() const { return pieces_.size() == static_cast<size_t>(IOV_MAX); }
  const iovec* data() const { return pieces_.data(); }
  unsigned long count() const { return static_cast<unsigned long>(pieces_.size()); }
  void clear() { pieces_.clear(); }

 private:
  std::vector<iovec> pieces_;
};

enum class Direction { kRead, kWrite };

// Runs gathered into calls of the kernel, each moving the next runs of one
// side into the next runs of the other; `ok` turns false at the first
// refused or short call.
class BatchedCopy {
 public:
  BatchedCopy(int64_t pid, Direction direction, int64_t max_call_bytes)
      : pid_(pid), direction_(direction), max_call_bytes_(max_call_bytes) {}

  // Addresses as integers: `remote` is in another process. False once a
  // call failed (the rest is not worth adding).
  bool add(uintptr_t local, uintptr_t remote, int64_t bytes) {
    while (bytes > 0 && ok_) {
      const int64_t take = std::min(bytes, max_call_bytes_ - batch_bytes_);
      local_.add(local, take);
      remote_.add(remote, take);
      batch_bytes_ += take;
      local += static_cast<uintptr_t>(take);
      remote += static_cast<uintptr_t>(take);
      bytes -= take;
      if (local_.full() || remote_.full() || batch_bytes_ == max_call_bytes_) flush();
    }
    return ok_;
  }

  bool finish() {
    if (batch_bytes_ > 0) flush();
    return ok_;
  }

 private:
  void flush() {
#ifdef __linux__
    const auto call = direction_ == Direction::kRead ? &process_vm_readv : &process_vm_writev;
    const ssize_t moved = call(static_cast<pid_t>(pid_), local_.data(), local_.count(),
                               remote_.data(), remote_.count(), 0);
    ok_ = ok_ && moved == batch_bytes_;
#else
    ok_ = false;
#endif
    batch_bytes_ = 0;
    local_.clear();
    remote_.clear();
  }

  const int64_t pid_;
  const Direction direction_;
  const int64_t max_call_bytes_;
  Pieces local_, remote_;
  int64_t batch_bytes_ = 0;
  bool ok_ = true;
};

// Whether no two elements of a tensor of `sizes` and `strides` share an
// address: with its dims of more than one index in rising stride order,
// each stride passes the farthest offset the dims before it reach. (ATen's
// has_internal_overlap gives up on most views that are not contiguous, the
// narrows a gather writes into.)
bool elements_apart(at::IntArrayRef sizes, at::IntArrayRef strides) {
  if (std::find(sizes.begin(), sizes.end(), 0) != sizes.end()) return true;  // no elements
  std::vector<std::pair<int64_t, int64_t>> dims;                             // (stride, size)
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] > 1) dims.emplace_back(strides[d], sizes[d]);
  }
  std::sort(dims.begin(), dims.end());
  int64_t reach = 0;
  for (const auto& [stride, size] : dims) {
    if (stride <= reach) return false;
    reach += stride * (size - 1);
  }
  return true;
}

// Whether `t` holds its values as stored, in memory of its own.
bool is_plain_memory(const at::Tensor& t) {
  return t.defined() && holds_plain_cpu_values(t) && t.has_storage();
}

bool has_strides_for(const RemoteTensor& remote, const at::Tensor& local) {
  return static_cast<int64_t>(remote.strides.size()) == local.dim() &&
         std::none_of(remote.strides.begin(), remote.strides.end(),
                      [](int64_t s) { return s < 0; });
}

// Moves every element of `local` from or to `remote`, in runs contiguous on
// both sides (the checks are the callers').
bool copy_with_peer(const at::Tensor& local, const RemoteTensor& remote, Direction direction,
                    int64_t max_call_bytes) {
  if (max_call_bytes <= 0) return false;
  if (local.numel() == 0) return true;
  const Runs runs = runs_of(local, remote.strides);
  BatchedCopy copy(remote.pid, direction, max_call_bytes);
  // Odometer over the dims before inner_dim, moving both runs' addresses.
  std::vector<int64_t> index(static_cast<size_t>(runs.inner_dim), 0);
  const int64_t element = local.element_size();
  uintptr_t here = reinterpret_cast<uintptr_t>(local.data_ptr());
  uintptr_t there = static_cast<uintptr_t>(remote.address);
  while (true) {
    if (!copy.add(here, there, runs.run_bytes)) return false;
    int64_t d = runs.inner_dim - 1;
    for (; d >= 0 && index[d] + 1 == local.size(d); --d) {
      here -= static_cast<uintptr_t>(index[d] * local.stride(d) * element);
      there -= static_cast<uintptr_t>(index[d] * remote.strides[d] * element);
      index[d] = 0;
    }
    if (d < 0) break;
    ++index[d];
    here += static_cast<uintptr_t>(local.stride(d) * element);
    there += static_cast<uintptr_t>(remote.strides[d] * element);
  }
  return copy.finish();
}

}  // namespace

bool read_peer_bytes(const RemoteBytes& source, const at::Tensor& destination) {
  if (!destination.defined() ||
      source.bytes != static_cast<int64_t>(destination.numel()) * destination.element_size()) {
    return false;
  }
  const c10::DimVector strides = c10::contiguous_strides(destination.sizes());
  return read_peer_tensor({source.pid, source.address, {strides.begin(), strides.end()}},
                          destination);
}

bool read_peer_tensor(const RemoteTensor& source, const at::Tensor& destination) {
  return peer_memory_internal::read_peer_tensor(source, destination, kMaxCallBytes);
}

bool write_peer_tensor(const at::Tensor& source, const RemoteTensor& destination) {
  return peer_memory_internal::write_peer_tensor(source, destination, kMaxCallBytes);
}

namespace peer_memory_internal {

bool read_peer_tensor(const RemoteTensor& source, const at::Tensor& destination,
                      int64_t max_call_bytes) {
  return is_plain_memory(destination) &&
         elements_apart(destination.sizes(), destination.strides()) &&
         has_strides_for(source, destination) &&
         copy_with_peer(destination, source, Direction::kRead, max_call_bytes);
}

bool write_peer_tensor(const at::Tensor& source, const RemoteTensor& destination,
                       int64_t max_call_bytes) {
  return is_plain_memory(source) && has_strides_for(destination, source) &&
         elements_apart(source.sizes(), destination.strides) &&
         copy_with_peer(source, destination, Direction::kWrite, max_call_bytes);
}

}  // namespace peer_memory_internal
}  // namespace dtensor
