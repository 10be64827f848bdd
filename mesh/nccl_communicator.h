// Copyright 2026 The dtensor Authors.
//
// mesh/nccl_communicator.h: the "nccl" backend, collectives on CUDA tensors.
//
// `NcclCommunicator` runs every collective of the Communicator contract with
// NCCL on tensors of one GPU, `device()` == cuda:<index>. The world is
// bootstrapped over MPI: start the program with `mpirun -np N`, and each
// process gets the GPU of its local rank on the node (modulo the GPUs seen).
//
//   auto world = dtensor::make_world_communicator("nccl");   // cached per process
//   at::Tensor t = at::ones({4}, at::TensorOptions().device(world->device()));
//   world->all_reduce(t, dtensor::ReduceOp::kSum);   // every rank: size() * 1
//
// Streams. By default a collective runs on the communicator's own stream,
// ordered after the caller's current torch CUDA stream, and the caller's
// stream is then made to wait for it: plain users get correct ordering
// without synchronizing, and the tensors are kept alive for the
// communicator's stream by the caching allocator (record_stream). With
// `set_stream(s)` collectives are enqueued on `s` with no ordering against
// any other stream; the caller then orders its work and keeps the tensors
// alive until `s` reaches them. Built against a libtorch without CUDA (no
// current stream to follow), calls are ordered after the legacy default
// stream and wait for their own completion before returning.
//
// Errors never hang silently. Communicators are non-blocking NCCL
// communicators; wherever this class waits (initialisation, ncclGroupEnd,
// barrier) it polls NCCL's asynchronous error state with a timeout,
// DTENSOR_NCCL_TIMEOUT_SECONDS (default 300) or `set_timeout`. On an NCCL
// error or a timeout the NCCL communicator is aborted and dtensor::Error
// names the call and the reason; later calls on this object throw too.
//
// Differences from the other backends, all forced by NCCL:
//  * band/bor/bxor have no NCCL reduction: all_reduce gathers every rank's
//    tensor and reduces locally, reduce_scatter exchanges the parts with an
//    all-to-all and reduces locally (size() times the data of a sum).
//  * send/recv cannot carry tags: only tag 0 is accepted, and messages
//    between two ranks match in the order they were posted.
//  * sum/product on bool are refused upstream; max/min on bool run as
//    uint8 max/min, which is logical or/and.
//
// Several ranks may share one GPU (design.md, section 7): when a node has
// fewer GPUs than ranks and NCCL_HOSTID is unset, each rank sets a distinct
// NCCL_HOSTID so that NCCL connects them over the network. Correct, slow:
// use it for tests, never for speed.
//
// A communicator is used by one thread at a time, like an MPI communicator.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <dtensor/mesh/communicator.h>

namespace dtensor {

class NcclCommunicator final : public Communicator {
 public:
  // Creates the world communicator over MPI_COMM_WORLD (collective: every MPI
  // rank must call it). Prefer make_world_communicator("nccl"), which creates
  // it once per process and then returns the same object.
  static std::shared_ptr<NcclCommunicator> create_world();

  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend_name() const override { return "nccl"; }
  // ~12 us per small all_gather (one H100); bandwidth of an NVLink-class link.
  CollectiveCosts costs() const override { return {12.0, 100000.0}; }
  c10::Device device() const override;

  // Enqueues later collectives on `stream`, a stream of device(), with no
  // ordering against other streams (see the class comment).
  void set_stream(cudaStream_t stream);
  // Back to the default: the communicator's own stream, ordered both ways
  // with the caller's current stream.
  void use_default_stream();
  // The stream the next collective is enqueued on.
  cudaStream_t stream() const { return user_stream_.value_or(own_stream_); }

  // How long a wait may last before the communicator is aborted. Sub-groups
  // made by `split` start with their parent's timeout.
  void set_timeout(std::chrono::milliseconds timeout);
  std::chrono::milliseconds timeout() const { return timeout_; }

  // The underlying NCCL communicator, for code that calls NCCL directly; null
  // once aborted.
  ncclComm_t nccl_comm() const { return comm_; }

 protected:
  void do_all_reduce(const at::Tensor& input, at::Tensor& output, ReduceOp op) override;
  void do_all_gather(const at::Tensor& input, at::Tensor& output) override;
  void do_all_gather_v(const at::Tensor& input, at::Tensor& output,
                       const std::vector<int64_t>& numel_per_rank) override;
  void do_reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op) override;
  void do_reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                           const std::vector<int64_t>& numel_per_rank, ReduceOp op) override;
  void do_all_to_all(const at::Tensor& input, at::Tensor& output) override;
  void do_all_to_all_v(const at::Tensor& input, const std::vector<int64_t>& send_numel,
                       at::Tensor& output, const std::vector<int64_t>& recv_numel) override;
  void do_broadcast(at::Tensor& tensor, int root) override;
  void do_scatter(const at::Tensor& input, at::Tensor& output, int root) override;
  void do_send(const at::Tensor& tensor, int peer, int tag) override;
  void do_recv(at::Tensor& tensor, int peer, int tag) override;
  void do_barrier() override;
  std::shared_ptr<Communicator> do_split(int color, int key) override;
  // The defaults, with their packing copies ordered on the communicator's
  // stream and their temporaries owned by it.
  void do_all_gather_v_along(const at::Tensor& input, at::Tensor& output,
                             const std::vector<int64_t>& sizes_per_rank, int64_t dim) override;
  void do_all_to_all_v_along(const at::Tensor& input, const std::vector<int64_t>& send_sizes,
                             int64_t send_dim, at::Tensor& output,
                             const std::vector<int64_t>& recv_sizes, int64_t recv_dim) override;
  void do_exchange(const std::vector<at::Tensor>& send_parts,
                   const std::vector<at::Tensor>& recv_parts) override;

 private:
  class Launch;  // one collective call: its stream and its ordering

  // Takes ownership of `comm`, whose initialisation may still be in progress;
  // `finish_init` waits for it.
  NcclCommunicator(ncclComm_t comm, int device_index, std::chrono::milliseconds timeout);
  void finish_init(const char* call, const char* nccl_call, ncclResult_t result);

  // Throws when an earlier error aborted the communicator.
  void check_usable(const char* call) const;
  // Success returns; ncclInProgress waits for the communicator to be ready;
  // an error aborts the communicator and throws.
  void check_nccl(const char* call, const char* nccl_call, ncclResult_t result);
  // Polls until `done()` is true, failing on an NCCL error or the timeout.
  template <typename Done>
  void wait_until(const char* call, const char* what, Done done);
  // Waits until everything enqueued on stream() has run.
  void wait_for_stream(const char* call);
  // Aborts the NCCL communicator (once) and remembers why.
  void abort(const std::string& reason);

  // Bitwise reductions, which NCCL lacks (see the class comment).
  void all_reduce_bitwise(const at::Tensor& input, at::Tensor& output, ReduceOp op);
  void reduce_scatter_bitwise(const at::Tensor& input, at::Tensor& output,
                              const std::vector<int64_t>& numel_per_rank, ReduceOp op);

  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  int device_index_ = 0;
  std::chrono::milliseconds timeout_;
  std::string abort_reason_;
  cudaStream_t own_stream_ = nullptr;
  // Where NCCL writes each split's child (see do_split).
  std::vector<std::unique_ptr<ncclComm_t>> split_results_;
  std::optional<cudaStream_t> user_stream_;
  cudaEvent_t order_event_ = nullptr;  // orders own_stream_ and the caller's stream
  void* barrier_scratch_ = nullptr;    // one int32 on the device, for barrier()
};

}  // namespace dtensor
