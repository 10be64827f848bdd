// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/nccl_communicator.h>

// Only MPI's C API is used; its C++ bindings would only add warnings.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

#include <ATen/ATen.h>

#if DTENSOR_TORCH_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <dtensor/base/check.h>
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace dtensor {
namespace {

using Clock = std::chrono::steady_clock;

void check_cuda(const char* call, const char* cuda_call, cudaError_t error) {
  DTENSOR_CHECK(error == cudaSuccess, call, ": ", cuda_call, ": expected cudaSuccess, found ",
                cudaGetErrorName(error), " (", cudaGetErrorString(error), ")");
}

// Sets the current CUDA device for a scope and restores the previous one:
// NCCL and the CUDA runtime act on the current device.
class DeviceGuard {
 public:
  DeviceGuard(const char* call, int device) : device_(device) {
    check_cuda(call, "cudaGetDevice", cudaGetDevice(&previous_));
    if (previous_ != device_) check_cuda(call, "cudaSetDevice", cudaSetDevice(device_));
  }
  ~DeviceGuard() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int device_;
  int previous_ = 0;
};

std::optional<ncclDataType_t> nccl_type_of(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float:
      return ncclFloat32;
    case c10::ScalarType::Double:
      return ncclFloat64;
    case c10::ScalarType::Half:
      return ncclFloat16;
    case c10::ScalarType::BFloat16:
      return ncclBfloat16;
    case c10::ScalarType::Char:
      return ncclInt8;
    case c10::ScalarType::Byte:
      return ncclUint8;
    // Bools are bytes holding 0 or 1, so uint8 max and min are logical or and
    // and; sum and product on bool are refused before reaching NCCL.
    case c10::ScalarType::Bool:
      return ncclUint8;
    case c10::ScalarType::Int:
      return ncclInt32;
    case c10::ScalarType::Long:
      return ncclInt64;
    default:
      return std::nullopt;
  }
}

ncclDataType_t nccl_type(const char* call, const at::Tensor& t) {
  const std::optional<ncclDataType_t> type = nccl_type_of(t.scalar_type());
  DTENSOR_CHECK(type.has_value(), call,
                ": dtype: expected float32, float64, float16, bfloat16, int8, uint8, int32, int64 "
                "or bool for NCCL, found ",
                t.scalar_type());
  return *type;
}

// The NCCL reduction of a non-bitwise op. Avg sums: see finish_average.
ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kProduct:
      return ncclProd;
    default:
      return ncclSum;
  }
}

ncclConfig_t nonblocking_config() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // every wait is then ours, and can time out
  return config;
}

std::chrono::milliseconds timeout_from_environment() {
  const char* text = std::getenv("DTENSOR_NCCL_TIMEOUT_SECONDS");
  if (text == nullptr || *text == '\0') return std::chrono::seconds(300);
  char* end = nullptr;
  const double seconds = std::strtod(text, &end);
  DTENSOR_CHECK(*end == '\0' && seconds > 0, "DTENSOR_NCCL_TIMEOUT_SECONDS: expected a positive ",
                "number of seconds, found \"", text, "\"");
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

// Address of element `offset` of `t`'s data. Pointer arithmetic only: the
// data is never read on the host.
void* element_ptr(const at::Tensor& t, int64_t offset) {
  return static_cast<char*>(t.data_ptr()) + offset * static_cast<int64_t>(t.element_size());
}

bool all_equal(const std::vector<int64_t>& values) {
  return std::adjacent_find(values.begin(), values.end(), std::not_equal_to<>()) == values.end();
}

// Keeps the first failure among the NCCL calls of one group, so that the
// group is always closed with ncclGroupEnd before the failure is reported.
class FirstFailure {
 public:
  void operator()(ncclResult_t result) {
    if (failure_ == ncclSuccess && result != ncclInProgress) failure_ = result;
  }
  ncclResult_t result() const { return failure_; }

 private:
  ncclResult_t failure_ = ncclSuccess;
};

// Enqueues the messages of an all-to-all-v. A zero-sized message is skipped;
// both ends know its size, so both skip it.
ncclResult_t enqueue_all_to_all_v(const at::Tensor& input, const std::vector<int64_t>& send_numel,
                                  const at::Tensor& output, const std::vector<int64_t>& recv_numel,
                                  ncclDataType_t type, ncclComm_t comm, cudaStream_t stream) {
  FirstFailure failure;
  int64_t send_offset = 0;
  int64_t recv_offset = 0;
  for (size_t peer = 0; peer < send_numel.size(); ++peer) {
    if (send_numel[peer] > 0) {
      failure(ncclSend(element_ptr(input, send_offset), send_numel[peer], type,
                       static_cast<int>(peer), comm, stream));
    }
    if (recv_numel[peer] > 0) {
      failure(ncclRecv(element_ptr(output, recv_offset), recv_numel[peer], type,
                       static_cast<int>(peer), comm, stream));
    }
    send_offset += send_numel[peer];
    recv_offset += recv_numel[peer];
  }
  return failure.result();
}

// out = rows[0] op rows[1] op ... for a bitwise `op`, rows being [n, m] and
// `out` [m]: the local half of the bitwise reductions NCCL lacks.
void fold_bitwise(const at::Tensor& rows, ReduceOp op, at::Tensor out) {
  out.copy_(rows[0]);
  for (int64_t r = 1; r < rows.size(0); ++r) {
    switch (op) {
      case ReduceOp::kBand:
        out.bitwise_and_(rows[r]);
        break;
      case ReduceOp::kBor:
        out.bitwise_or_(rows[r]);
        break;
      default:
        out.bitwise_xor_(rows[r]);
        break;
    }
  }
}

struct NodeRanks {
  int rank;
  int size;
};

// This process's rank among the processes of its node.
NodeRanks node_ranks(const char* call) {
  MPI_Comm node = MPI_COMM_NULL;
  DTENSOR_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                                    &node) == MPI_SUCCESS,
                call, ": MPI_Comm_split_type: expected MPI_SUCCESS, found an error");
  NodeRanks ranks{0, 1};
  MPI_Comm_rank(node, &ranks.rank);
  MPI_Comm_size(node, &ranks.size);
  MPI_Comm_free(&node);
  return ranks;
}

// NCCL refuses two ranks of one communicator on one GPU of one host, but
// accepts them as ranks of distinct hosts, which a distinct NCCL_HOSTID makes
// them; they then talk over the network transport (design.md, section 7). A
// user's own NCCL_HOSTID wins.
void give_this_rank_its_own_host_id(int world_rank) {
  if (std::getenv("NCCL_HOSTID") != nullptr) return;
  const std::string host_id = absl::StrCat("dtensor-rank-", world_rank);
  setenv("NCCL_HOSTID", host_id.c_str(), /*overwrite=*/1);
}

// Rank 0 creates the id and sends it over MPI. The first byte says whether it
// could, so that a failure there stops every rank instead of leaving the
// others waiting in ncclCommInitRank.
ncclUniqueId broadcast_unique_id(Communicator& mpi, const char* call) {
  at::Tensor bytes = at::zeros({1 + static_cast<int64_t>(sizeof(ncclUniqueId))}, at::kByte);
  uint8_t* data = bytes.data_ptr<uint8_t>();
  ncclUniqueId id{};
  ncclResult_t created = ncclSuccess;
  if (mpi.rank() == 0) {
    created = ncclGetUniqueId(&id);
    data[0] = created == ncclSuccess ? 1 : 0;
    std::memcpy(data + 1, &id, sizeof id);
  }
  mpi.broadcast(bytes, 0);
  DTENSOR_CHECK(data[0] == 1, call, ": ncclGetUniqueId on rank 0: expected ncclSuccess, found ",
                mpi.rank() == 0 ? ncclGetErrorString(created) : "a failure (see rank 0)");
  std::memcpy(&id, data + 1, sizeof id);
  return id;
}

}  // namespace

// One collective call. Construction picks the stream and, by default, orders
// it after the caller's current stream; `finish` orders the caller's stream
// after the call and keeps the tensors alive for the communicator's stream.
class NcclCommunicator::Launch {
 public:
  Launch(NcclCommunicator& comm, const char* call)
      : comm_(comm), call_(call), device_(call, comm.device_index_), stream_(comm.stream()) {
    comm.check_usable(call);
    if (follows_caller()) {
      caller_ = caller_stream();
      order(/*waiter=*/stream_, /*signaller=*/caller_);
    }
  }

  // Runs `ops(comm, stream)`, NCCL calls returning their first failure, as
  // one NCCL group, and waits until NCCL has enqueued it.
  template <typename Ops>
  void group(Ops ops) {
    comm_.check_nccl(call_, "ncclGroupStart", ncclGroupStart());
    const ncclResult_t enqueued = ops(comm_.comm_, stream_);
    const ncclResult_t ended = ncclGroupEnd();
    comm_.check_nccl(call_, "enqueueing the group", enqueued);
    comm_.check_nccl(call_, "ncclGroupEnd", ended);
  }

  // Runs torch ops on the communicator's stream, so that they are ordered
  // with the NCCL calls and their temporaries belong to that stream.
  template <typename Fn>
  void torch_on_stream(Fn fn) {
#if DTENSOR_TORCH_HAS_CUDA
    c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromExternal(
        stream_, static_cast<c10::DeviceIndex>(comm_.device_index_)));
#endif
    fn();
  }

  // NCCL's ncclAvg scales every term by 1/n before summing; local and MPI
  // sum, then divide, which rounds differently when n is not a power of two.
  // NCCL sums too (nccl_op), and the sum is divided here, on the stream.
  void finish_average(ReduceOp op, const at::Tensor& output) {
    if (op == ReduceOp::kAvg) torch_on_stream([&] { output.div_(comm_.size_); });
  }

  void finish(absl::Span<const at::Tensor* const> tensors) {
    if (!follows_caller()) return;  // set_stream: the caller orders and keeps alive
    order(/*waiter=*/caller_, /*signaller=*/stream_);
#if DTENSOR_TORCH_HAS_CUDA
    // The caching allocator must not hand these blocks out again before the
    // communicator's stream has used them.
    const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromExternal(
        stream_, static_cast<c10::DeviceIndex>(comm_.device_index_));
    for (const at::Tensor* t : tensors) {
      if (t->defined() && t->has_storage()) {
        c10::cuda::CUDACachingAllocator::recordStream(t->storage().data_ptr(), stream);
      }
    }
#else
    // No allocator to tell: wait until the stream is done with the tensors.
    static_cast<void>(tensors);
    comm_.wait_for_stream(call_);
#endif
  }

 private:
  bool follows_caller() const { return !comm_.user_stream_.has_value(); }

  // The stream the caller's work is on: torch's current stream, or without a
  // CUDA libtorch the legacy default stream.
  cudaStream_t caller_stream() const {
#if DTENSOR_TORCH_HAS_CUDA
    return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(comm_.device_index_))
        .stream();
#else
    return cudaStreamLegacy;
#endif
  }

  void order(cudaStream_t waiter, cudaStream_t signaller) {
    check_cuda(call_, "cudaEventRecord", cudaEventRecord(comm_.order_event_, signaller));
    check_cuda(call_, "cudaStreamWaitEvent", cudaStreamWaitEvent(waiter, comm_.order_event_, 0));
  }

  NcclCommunicator& comm_;
  const char* call_;
  DeviceGuard device_;
  cudaStream_t stream_;
  cudaStream_t caller_ = nullptr;
};

std::shared_ptr<NcclCommunicator> NcclCommunicator::create_world() {
  constexpr const char* kCall = "nccl world";
  // The MPI world initialises MPI and carries the bootstrap messages.
  const std::shared_ptr<Communicator> mpi = make_world_communicator("mpi");
  const NodeRanks node = node_ranks(kCall);

  // Every rank learns whether all found a GPU, so that none waits forever for
  // a rank that gave up.
  int device_count = 0;
  const cudaError_t probed = cudaGetDeviceCount(&device_count);
  const bool has_device = probed == cudaSuccess && device_count > 0;
  at::Tensor all_have_device = at::full({1}, has_device ? 1 : 0, at::kInt);
  mpi->all_reduce(all_have_device, ReduceOp::kMin);
  DTENSOR_CHECK(all_have_device.item<int>() == 1, kCall,
                ": expected a CUDA device on every rank, found none on ",
                has_device ? "another rank" : "this rank",
                " (cudaGetDeviceCount: ", cudaGetErrorString(probed), ", ", device_count,
                " devices)");

  const int device = node.rank % device_count;
  if (device_count < node.size) give_this_rank_its_own_host_id(mpi->rank());
  // The process works on its GPU from now on, as torch.cuda.set_device would.
  check_cuda(kCall, "cudaSetDevice", cudaSetDevice(device));

  const ncclUniqueId id = broadcast_unique_id(*mpi, kCall);
  ncclConfig_t config = nonblocking_config();
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, mpi->size(), id, mpi->rank(), &config);
  std::shared_ptr<NcclCommunicator> world(
      new NcclCommunicator(comm, device, timeout_from_environment()));
  world->finish_init(kCall, "ncclCommInitRankConfig", started);
  return world;
}

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int device_index,
                                   std::chrono::milliseconds timeout)
    : comm_(comm), device_index_(device_index), timeout_(timeout) {}

void NcclCommunicator::finish_init(const char* call, const char* nccl_call, ncclResult_t result) {
  if (comm_ == nullptr) {
    abort(absl::StrCat(nccl_call, ": expected a communicator, found none (\"",
                       ncclGetErrorString(result), "\")"));
  }
  check_usable(call);
  check_nccl(call, nccl_call, result);
  check_nccl(call, "ncclCommUserRank", ncclCommUserRank(comm_, &rank_));
  check_nccl(call, "ncclCommCount", ncclCommCount(comm_, &size_));
  DeviceGuard device(call, device_index_);
  check_cuda(call, "cudaStreamCreateWithFlags",
             cudaStreamCreateWithFlags(&own_stream_, cudaStreamNonBlocking));
  check_cuda(call, "cudaEventCreateWithFlags",
             cudaEventCreateWithFlags(&order_event_, cudaEventDisableTiming));
  check_cuda(call, "cudaMalloc", cudaMalloc(&barrier_scratch_, sizeof(int32_t)));
}

NcclCommunicator::~NcclCommunicator() {
  // A destructor must not throw: a failure here costs at most leaked
  // resources, and check_nccl has then aborted the communicator.
  try {
    DeviceGuard device("~NcclCommunicator", device_index_);
    if (comm_ != nullptr) {
      check_nccl("~NcclCommunicator", "ncclCommFinalize", ncclCommFinalize(comm_));
      ncclCommDestroy(comm_);
      comm_ = nullptr;
    }
    if (barrier_scratch_ != nullptr) cudaFree(barrier_scratch_);
    if (order_event_ != nullptr) cudaEventDestroy(order_event_);
    // own_stream_ is never destroyed: tensors the caching allocator recorded
    // on it may outlive this communicator, and freeing them records an event
    // on the stream.
  } catch (const Error&) {
  }
}

c10::Device NcclCommunicator::device() const {
  return c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device_index_));
}

void NcclCommunicator::set_stream(cudaStream_t stream) { user_stream_ = stream; }

void NcclCommunicator::use_default_stream() { user_stream_.reset(); }

void NcclCommunicator::set_timeout(std::chrono::milliseconds timeout) {
  DTENSOR_CHECK(timeout.count() > 0, "set_timeout: expected a positive timeout, found ",
                timeout.count(), " ms");
  timeout_ = timeout;
}

void NcclCommunicator::check_usable(const char* call) const {
  DTENSOR_CHECK(comm_ != nullptr, call,
                ": expected a working NCCL communicator, found one aborted after: ", abort_reason_);
}

void NcclCommunicator::abort(const std::string& reason) {
  if (comm_ != nullptr) ncclCommAbort(comm_);
  comm_ = nullptr;
  abort_reason_ = reason;
}

void NcclCommunicator::check_nccl(const char* call, const char* nccl_call, ncclResult_t result) {
  if (result == ncclInProgress) {
    wait_until(call, nccl_call, [](ncclResult_t state) { return state == ncclSuccess; });
    return;
  }
  const bool ok = result == ncclSuccess;
  if (!ok) {
    abort(absl::StrCat(nccl_call, ": expected ncclSuccess, found \"", ncclGetErrorString(result),
                       "\" (", ncclGetLastError(comm_), ")"));
  }
  DTENSOR_CHECK(ok, call, ": ", abort_reason_, "; the NCCL communicator was aborted");
}

template <typename Done>
void NcclCommunicator::wait_until(const char* call, const char* what, Done done) {
  const Clock::time_point start = Clock::now();
  for (int polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    const ncclResult_t queried = ncclCommGetAsyncError(comm_, &state);
    const ncclResult_t error = queried != ncclSuccess ? queried : state;
    const bool failed = error != ncclSuccess && error != ncclInProgress;
    if (failed) {
      abort(absl::StrCat(what, ": expected ncclSuccess, found \"", ncclGetErrorString(error),
                         "\" (", ncclGetLastError(comm_), ")"));
    }
    DTENSOR_CHECK(!failed, call, ": ", abort_reason_, "; the NCCL communicator was aborted");
    if (done(state)) return;

    const bool timed_out = Clock::now() - start > timeout_;
    if (timed_out) {
      abort(absl::StrCat(what, ": expected completion within ", timeout_.count(),
                         " ms (DTENSOR_NCCL_TIMEOUT_SECONDS), found none; are all ranks making "
                         "the same calls?"));
    }
    DTENSOR_CHECK(!timed_out, call, ": ", abort_reason_, "; the NCCL communicator was aborted");
    // Spin briefly for the common fast completion, then stop burning a core.
    if (polls < 1000) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

void NcclCommunicator::wait_for_stream(const char* call) {
  const cudaStream_t stream = this->stream();
  wait_until(call, "waiting for the stream", [&](ncclResult_t) {
    const cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaErrorNotReady) return false;
    check_cuda(call, "cudaStreamQuery", status);
    return true;
  });
}

void NcclCommunicator::do_all_reduce(const at::Tensor& input, at::Tensor& output, ReduceOp op) {
  if (is_bitwise(op)) return all_reduce_bitwise(input, output, op);
  if (input.numel() == 0) return;
  const ncclDataType_t type = nccl_type("all_reduce", input);
  Launch launch(*this, "all_reduce");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(input.data_ptr(), output.data_ptr(), input.numel(), type, nccl_op(op),
                         comm, stream);
  });
  launch.finish_average(op, output);
  launch.finish({&input, &output});
}

// NCCL has no bitwise reduction: gather every rank's tensor and fold locally.
void NcclCommunicator::all_reduce_bitwise(const at::Tensor& input, at::Tensor& output,
                                          ReduceOp op) {
  if (input.numel() == 0) return;
  const ncclDataType_t type = nccl_type("all_reduce", input);
  Launch launch(*this, "all_reduce");
  launch.torch_on_stream([&] {
    const at::Tensor rows = at::empty({size_, input.numel()}, input.options());
    launch.group([&](ncclComm_t comm, cudaStream_t stream) {
      return ncclAllGather(input.data_ptr(), rows.data_ptr(), input.numel(), type, comm, stream);
    });
    fold_bitwise(rows, op, output.view({-1}));
  });
  launch.finish({&input, &output});
}

void NcclCommunicator::do_all_gather(const at::Tensor& input, at::Tensor& output) {
  if (input.numel() == 0) return;
  const ncclDataType_t type = nccl_type("all_gather", input);
  Launch launch(*this, "all_gather");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllGather(input.data_ptr(), output.data_ptr(), input.numel(), type, comm, stream);
  });
  launch.finish({&input, &output});
}

// One broadcast per contributing rank into its slice of the output, in one
// group: NCCL runs them concurrently, and ranks contributing nothing cost
// nothing (a padded all-gather would move the largest part from every rank).
void NcclCommunicator::do_all_gather_v(const at::Tensor& input, at::Tensor& output,
                                       const std::vector<int64_t>& numel_per_rank) {
  if (all_equal(numel_per_rank)) return do_all_gather(input, output);
  const ncclDataType_t type = nccl_type("all_gather_v", input);
  Launch launch(*this, "all_gather_v");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    FirstFailure failure;
    int64_t offset = 0;
    for (int root = 0; root < size_; ++root) {
      const int64_t numel = numel_per_rank[root];
      if (numel > 0) {
        failure(ncclBroadcast(input.data_ptr(), element_ptr(output, offset), numel, type, root,
                              comm, stream));
      }
      offset += numel;
    }
    return failure.result();
  });
  launch.finish({&input, &output});
}

void NcclCommunicator::do_reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op) {
  if (is_bitwise(op)) {
    return reduce_scatter_bitwise(input, output, std::vector<int64_t>(size_, output.numel()), op);
  }
  if (output.numel() == 0) return;
  const ncclDataType_t type = nccl_type("reduce_scatter", input);
  Launch launch(*this, "reduce_scatter");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return ncclReduceScatter(input.data_ptr(), output.data_ptr(), output.numel(), type, nccl_op(op),
                             comm, stream);
  });
  launch.finish_average(op, output);
  launch.finish({&input, &output});
}

// One reduce per rank with a part, rooted at that rank, in one group.
void NcclCommunicator::do_reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                                           const std::vector<int64_t>& numel_per_rank,
                                           ReduceOp op) {
  if (is_bitwise(op)) return reduce_scatter_bitwise(input, output, numel_per_rank, op);
  if (all_equal(numel_per_rank)) return do_reduce_scatter(input, output, op);
  const ncclDataType_t type = nccl_type("reduce_scatter_v", input);
  Launch launch(*this, "reduce_scatter_v");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    FirstFailure failure;
    int64_t offset = 0;
    for (int root = 0; root < size_; ++root) {
      const int64_t numel = numel_per_rank[root];
      if (numel > 0) {
        // The receive buffer is only read on the root.
        failure(ncclReduce(element_ptr(input, offset), root == rank_ ? output.data_ptr() : nullptr,
                           numel, type, nccl_op(op), root, comm, stream));
      }
      offset += numel;
    }
    return failure.result();
  });
  launch.finish_average(op, output);
  launch.finish({&input, &output});
}

// NCCL has no bitwise reduction: each rank receives every rank's copy of its
// own part through an all-to-all (the same bytes a reduce-scatter moves per
// rank, times size()), then folds them locally.
void NcclCommunicator::reduce_scatter_bitwise(const at::Tensor& input, at::Tensor& output,
                                              const std::vector<int64_t>& numel_per_rank,
                                              ReduceOp op) {
  const int64_t mine = numel_per_rank[rank_];
  const ncclDataType_t type = nccl_type("reduce_scatter", input);
  Launch launch(*this, "reduce_scatter");
  launch.torch_on_stream([&] {
    const at::Tensor parts = at::empty({size_, mine}, output.options());
    launch.group([&](ncclComm_t comm, cudaStream_t stream) {
      return enqueue_all_to_all_v(input, numel_per_rank, parts, std::vector<int64_t>(size_, mine),
                                  type, comm, stream);
    });
    if (mine > 0) fold_bitwise(parts, op, output.view({-1}));
  });
  launch.finish({&input, &output});
}

// Grouped sends and receives, not ncclAlltoAll: that only exists from NCCL
// 2.28, and a CUDA libtorch may load its own older libnccl.so.2 into the
// process in place of the one built against.
void NcclCommunicator::do_all_to_all(const at::Tensor& input, at::Tensor& output) {
  const std::vector<int64_t> blocks(size_, input.numel() / size_);
  do_all_to_all_v(input, blocks, output, blocks);
}

void NcclCommunicator::do_all_to_all_v(const at::Tensor& input,
                                       const std::vector<int64_t>& send_numel, at::Tensor& output,
                                       const std::vector<int64_t>& recv_numel) {
  const ncclDataType_t type = nccl_type("all_to_all_v", input);
  Launch launch(*this, "all_to_all_v");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return enqueue_all_to_all_v(input, send_numel, output, recv_numel, type, comm, stream);
  });
  launch.finish({&input, &output});
}

void NcclCommunicator::do_all_gather_v_along(const at::Tensor& input, at::Tensor& output,
                                             const std::vector<int64_t>& sizes_per_rank,
                                             int64_t dim) {
  Launch launch(*this, "all_gather_v");
  launch.torch_on_stream(
      [&] { Communicator::do_all_gather_v_along(input, output, sizes_per_rank, dim); });
  launch.finish({&input, &output});
}

void NcclCommunicator::do_all_to_all_v_along(const at::Tensor& input,
                                             const std::vector<int64_t>& send_sizes,
                                             int64_t send_dim, at::Tensor& output,
                                             const std::vector<int64_t>& recv_sizes,
                                             int64_t recv_dim) {
  Launch launch(*this, "all_to_all_v");
  launch.torch_on_stream([&] {
    Communicator::do_all_to_all_v_along(input, send_sizes, send_dim, output, recv_sizes, recv_dim);
  });
  launch.finish({&input, &output});
}

void NcclCommunicator::do_exchange(const std::vector<at::Tensor>& send_parts,
                                   const std::vector<at::Tensor>& recv_parts) {
  Launch launch(*this, "exchange");
  launch.torch_on_stream([&] { Communicator::do_exchange(send_parts, recv_parts); });
  std::vector<const at::Tensor*> parts;
  for (const std::vector<at::Tensor>* side : {&send_parts, &recv_parts}) {
    for (const at::Tensor& part : *side) parts.push_back(&part);
  }
  launch.finish(parts);
}

void NcclCommunicator::do_broadcast(at::Tensor& tensor, int root) {
  if (tensor.numel() == 0) return;
  const ncclDataType_t type = nccl_type("broadcast", tensor);
  Launch launch(*this, "broadcast");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.numel(), type, root, comm,
                         stream);
  });
  launch.finish({&tensor});
}

// The root sends block p to every rank p, itself included, and every rank
// receives one block from the root: an all-to-all-v with one non-empty row
// (ncclScatter needs NCCL 2.28, see do_all_to_all).
void NcclCommunicator::do_scatter(const at::Tensor& input, at::Tensor& output, int root) {
  if (output.numel() == 0) return;
  const ncclDataType_t type = nccl_type("scatter", output);
  // `input` only matters on the root, and may be undefined elsewhere.
  const at::Tensor& source = rank_ == root ? input : output;
  const std::vector<int64_t> send_numel(size_, rank_ == root ? output.numel() : 0);
  std::vector<int64_t> recv_numel(size_, 0);
  recv_numel[root] = output.numel();
  Launch launch(*this, "scatter");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return enqueue_all_to_all_v(source, send_numel, output, recv_numel, type, comm, stream);
  });
  launch.finish({&source, &output});
}

// NCCL messages carry no tag: only tag 0 is accepted, so that code written for
// tags fails loudly here instead of matching the wrong message. Messages
// between two ranks match in the order they were posted.
void NcclCommunicator::do_send(const at::Tensor& tensor, int peer, int tag) {
  DTENSOR_CHECK(tag == 0,
                "send: tag: expected 0 (NCCL messages carry no tag and match in "
                "order), found ",
                tag);
  if (tensor.numel() == 0) return;
  const ncclDataType_t type = nccl_type("send", tensor);
  Launch launch(*this, "send");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return ncclSend(tensor.data_ptr(), tensor.numel(), type, peer, comm, stream);
  });
  launch.finish({&tensor});
}

void NcclCommunicator::do_recv(at::Tensor& tensor, int peer, int tag) {
  DTENSOR_CHECK(tag == 0,
                "recv: tag: expected 0 (NCCL messages carry no tag and match in "
                "order), found ",
                tag);
  if (tensor.numel() == 0) return;
  const ncclDataType_t type = nccl_type("recv", tensor);
  Launch launch(*this, "recv");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return ncclRecv(tensor.data_ptr(), tensor.numel(), type, peer, comm, stream);
  });
  launch.finish({&tensor});
}

// An all-reduce of one element that every rank must join, then a wait for the
// stream: on return every rank has entered the barrier and this rank's
// earlier work on the stream is done.
void NcclCommunicator::do_barrier() {
  Launch launch(*this, "barrier");
  launch.group([&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(barrier_scratch_, barrier_scratch_, 1, ncclInt32, ncclSum, comm, stream);
  });
  wait_for_stream("barrier");
  launch.finish({});
}

std::shared_ptr<Communicator> NcclCommunicator::do_split(int color, int key) {
  constexpr const char* kCall = "split";
  check_usable(kCall);
  DeviceGuard device(kCall, device_index_);
  ncclConfig_t config = nonblocking_config();
  // A non-blocking split writes the child from NCCL's own thread when it is
  // done, which can be after the parent's error state reads success (poll
  // it) and after this call returns for a rank that joins no group: the
  // slot lives as long as this communicator.
  split_results_.push_back(std::make_unique<ncclComm_t>(nullptr));
  ncclComm_t* child = split_results_.back().get();
  check_nccl(kCall, "ncclCommSplit",
             ncclCommSplit(comm_, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, child, &config));
  if (color < 0) return nullptr;
  wait_until(kCall, "ncclCommSplit", [child](ncclResult_t state) {
    return state == ncclSuccess && __atomic_load_n(child, __ATOMIC_ACQUIRE) != nullptr;
  });
  std::shared_ptr<NcclCommunicator> group(new NcclCommunicator(*child, device_index_, timeout_));
  group->finish_init(kCall, "ncclCommSplit", ncclInProgress);
  return group;
}

namespace {

// The world is created on first use and never destroyed: tearing NCCL down
// from a static destructor, after the CUDA runtime may have unloaded, can
// crash or hang at exit.
std::shared_ptr<Communicator> nccl_world() {
  static std::mutex* const mutex = new std::mutex;
  static std::shared_ptr<NcclCommunicator>* const world = new std::shared_ptr<NcclCommunicator>;
  std::lock_guard<std::mutex> lock(*mutex);
  if (*world == nullptr) *world = NcclCommunicator::create_world();
  return *world;
}

}  // namespace

DTENSOR_REGISTER_COMMUNICATOR_BACKEND("nccl", nccl_world);

}  // namespace dtensor
