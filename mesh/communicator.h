// Copyright 2026 The dtensor Authors.
//
// mesh/communicator.h: one process group and the collectives dtensor needs.
//
// A `Communicator` connects `size()` ranks; each rank holds its own object and
// every rank of the group must make the same collective calls in the same
// order (SPMD). Backends: "local" (ranks are threads of one process, see
// local_communicator.h), "mpi" (CPU tensors over MPI) and "nccl" (CUDA
// tensors). Get a world communicator with `make_world_communicator(backend)`
// or from a backend's own constructor; derive sub-groups with `split`.
//
// Conventions shared by every collective:
//  * Tensors are contiguous, on `device()`'s type, and input and output share a
//    dtype; any violation throws dtensor::Error before anything is sent, naming
//    the argument, what was expected and what was found.
//  * "Rows" are slices along dim 0; the `*_v` variants take one row count per
//    rank (zero allowed). A 0-dim tensor counts as one row of one element.
//  * Outputs are written, never resized: pass them with the documented shape.
//  * Calls are blocking for the caller's view of the data. On "nccl" they are
//    ordered on the communicator's stream (see nccl_communicator.h) and the
//    tensors must stay alive until that stream reaches them.
//
//   auto world = dtensor::make_world_communicator("mpi");
//   at::Tensor t = at::ones({4});
//   world->all_reduce(t, dtensor::ReduceOp::kSum);   // every rank: size() * 1
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <dtensor/mesh/collective_costs.h>
#include <dtensor/mesh/reduce_op.h>
#include "absl/types/span.h"

namespace dtensor {

class Communicator {
 public:
  virtual ~Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  // This rank's index in the group, in [0, size()).
  virtual int rank() const = 0;
  // Number of ranks in the group.
  virtual int size() const = 0;
  // "local", "mpi" or "nccl" (or a plugin's name).
  virtual std::string_view backend_name() const = 0;
  // The device tensors passed to this communicator must live on.
  virtual c10::Device device() const = 0;
  // What the planner assumes this backend's collectives cost.
  virtual CollectiveCosts costs() const { return {}; }

  // Reduces `tensor` over all ranks in place.
  void all_reduce(at::Tensor& tensor, ReduceOp op);

  // Out of place: `output` (input's shape and dtype) receives the reduction
  // of every rank's `input`, which is left unchanged. Saves the copy that
  // an in-place call on a copy of `input` costs. `output` may be `input`
  // itself (then this is the in-place call) but may not overlap it otherwise.
  void all_reduce(const at::Tensor& input, at::Tensor& output, ReduceOp op);

  // `output` receives the inputs of ranks 0..size()-1 concatenated along dim 0:
  // output.size(0) == size() * input.size(0), other dims equal. A 0-dim input
  // gathers into a 1-D output of size().
  void all_gather(const at::Tensor& input, at::Tensor& output);

  // Like all_gather with unequal parts: rank r contributes `rows_per_rank[r]`
  // rows; output.size(0) == sum(rows_per_rank).
  void all_gather_v(const at::Tensor& input, at::Tensor& output,
                    absl::Span<const int64_t> rows_per_rank);

  // Like all_gather_v with the parts laid along `dim` instead of dim 0: rank
  // r's input has `sizes_per_rank[r]` slices along `dim` and fills
  // output.narrow(dim, sum of the sizes before r, sizes_per_rank[r]); the
  // other dims of input and output are equal. Gathering S(d) -> R this way
  // needs no transposes around the collective: local copies each part
  // straight into place, MPI receives a small output there through a
  // derived datatype and gathers a large one contiguously, NCCL gathers
  // contiguously; a contiguous gather copies each part into place once. Its
  // CUDA staging buffers come from the caching allocator, the CPU ones from
  // the buffer pool (base/buffer_pool.h).
  void all_gather_v(const at::Tensor& input, at::Tensor& output,
                    absl::Span<const int64_t> sizes_per_rank, int64_t dim);

  // Reduces the inputs and gives rank r rows [r*k, (r+1)*k) of the result,
  // where k = output.size(0) and input.size(0) == size() * k. `output` may
  // not overlap `input` (as for MPI), here and in reduce_scatter_v.
  void reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op);

  // Like reduce_scatter with unequal parts: rank r receives `rows_per_rank[r]`
  // rows starting at the sum of the counts before it.
  void reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                        absl::Span<const int64_t> rows_per_rank, ReduceOp op);

  // Block p of `input` (input.size(0) / size() rows) goes to rank p; block p of
  // `output` comes from rank p. input and output have the same shape.
  void all_to_all(const at::Tensor& input, at::Tensor& output);

  // Rank q sends `send_rows[p]` consecutive rows of `input` to rank p and
  // receives `recv_rows[p]` rows from rank p into `output`, in rank order.
  // send_rows[p] on rank q must equal recv_rows[q] on rank p.
  void all_to_all_v(const at::Tensor& input, absl::Span<const int64_t> send_rows,
                    at::Tensor& output, absl::Span<const int64_t> recv_rows);

  // Like all_to_all_v with messages cut along any dims: rank q sends rank p
  // the `send_sizes[p]` slices of `input` along `send_dim` that follow those
  // for ranks before p, and rank p receives them into the `recv_sizes[q]`
  // slices of `output` along `recv_dim` that follow those from ranks before
  // q. What q sends p must have the shape of the place p receives it in,
  // so every rank passes the same sizes: the local backend checks this;
  // elsewhere it is not checked, and a call that breaks it is undefined (MPI
  // chooses how to move the parts between two dims from each rank's own
  // shapes and sizes: ranks whose shapes do not fit may wait for each other
  // forever). Re-sharding S(a) -> S(b) is send_dim b, recv_dim a: no pack
  // or unpack copies on local (strided parts in place), one each at most on
  // NCCL, and on MPI none where ranks copy from and into each other's
  // memory (mpi_communicator.h).
  void all_to_all_v(const at::Tensor& input, absl::Span<const int64_t> send_sizes, int64_t send_dim,
                    at::Tensor& output, absl::Span<const int64_t> recv_sizes, int64_t recv_dim);

  // The most general exchange: rank q sends `send_parts[p]` to rank p, which
  // receives it into its `recv_parts[q]`. Parts may be empty, strided views
  // (of a local shard, say) and, on the sending side, the same memory for
  // several ranks; receiving parts must not overlap each other or any sent
  // part. What rank q sends rank p has the shape of rank p's recv_parts[q]
  // (the local backend checks this; elsewhere the element counts must agree
  // and are not checked, as in all_to_all_v). For moving pieces that are not
  // consecutive slices of one tensor: local copies each part straight into
  // place, MPI sends one message per peer described by a derived datatype
  // (no copy of ours), the default (NCCL) packs and unpacks the parts that
  // are not alone in their direction.
  void exchange(absl::Span<const at::Tensor> send_parts, absl::Span<const at::Tensor> recv_parts);

  // Copies `tensor` of rank `root` into `tensor` of every rank.
  void broadcast(at::Tensor& tensor, int root);

  // Rank `root` holds `input` with size() * output.size(0) rows; rank r
  // receives block r into `output`. `input` is ignored (may be undefined) on
  // the other ranks.
  void scatter(const at::Tensor& input, at::Tensor& output, int root);

  // Point-to-point: a send to `peer` must be matched by a recv from this rank
  // with the same tag, shape and dtype.
  void send(const at::Tensor& tensor, int peer, int tag = 0);
  void recv(at::Tensor& tensor, int peer, int tag = 0);

  // Returns once every rank has entered it.
  void barrier();

  // Collective: ranks passing the same `color` (>= 0) form a new group ordered
  // by (key, rank). A negative color joins no group and returns nullptr.
  std::shared_ptr<Communicator> split(int color, int key);

 protected:
  Communicator() = default;

  // Backends implement these; arguments were validated by the public methods
  // (contiguity, device, dtype agreement, shapes and counts), and row counts
  // were converted to element counts. `output` of do_all_reduce is either
  // `input` (in place) or does not overlap it.
  virtual void do_all_reduce(const at::Tensor& input, at::Tensor& output, ReduceOp op) = 0;
  virtual void do_all_gather(const at::Tensor& input, at::Tensor& output) = 0;
  virtual void do_all_gather_v(const at::Tensor& input, at::Tensor& output,
                               const std::vector<int64_t>& numel_per_rank) = 0;
  virtual void do_reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op) = 0;
  virtual void do_reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                                   const std::vector<int64_t>& numel_per_rank, ReduceOp op) = 0;
  virtual void do_all_to_all(const at::Tensor& input, at::Tensor& output) = 0;
  virtual void do_all_to_all_v(const at::Tensor& input, const std::vector<int64_t>& send_numel,
                               at::Tensor& output, const std::vector<int64_t>& recv_numel) = 0;
  virtual void do_broadcast(at::Tensor& tensor, int root) = 0;
  virtual void do_scatter(const at::Tensor& input, at::Tensor& output, int root) = 0;
  virtual void do_send(const at::Tensor& tensor, int peer, int tag) = 0;
  virtual void do_recv(at::Tensor& tensor, int peer, int tag) = 0;
  virtual void do_barrier() = 0;
  virtual std::shared_ptr<Communicator> do_split(int color, int key) = 0;

  // The forms along any dim, validated like the others (sizes are slices
  // along the dim, not elements). The defaults run the contiguous
  // collectives above: parts that are not consecutive memory (some dim
  // before the cut has more than one index) are packed into, or received
  // through, one temporary and copied. Backends that can write strided
  // memory directly override them.
  virtual void do_all_gather_v_along(const at::Tensor& input, at::Tensor& output,
                                     const std::vector<int64_t>& sizes_per_rank, int64_t dim);
  virtual void do_all_to_all_v_along(const at::Tensor& input,
                                     const std::vector<int64_t>& send_sizes, int64_t send_dim,
                                     at::Tensor& output, const std::vector<int64_t>& recv_sizes,
                                     int64_t recv_dim);
  // Whether consecutive slices of contiguous `t` along `dim` are consecutive
  // memory (no dim before `dim` has more than one index).
  static bool slices_are_consecutive(const at::Tensor& t, int64_t dim);
  // The consecutive slices of `t` along `dim`, `sizes[p]` of them for rank p:
  // views, one per rank.
  static std::vector<at::Tensor> slices_along(const at::Tensor& t, int64_t dim,
                                              const std::vector<int64_t>& sizes);
  // `sizes` with `extent` at `dim` (a peer's part of a shape that only the
  // cut dim tells apart).
  static std::vector<int64_t> shape_with(at::IntArrayRef sizes, int64_t dim, int64_t extent);

  // The default runs do_all_to_all_v on one packed buffer each way; a side
  // whose non-empty parts are contiguous and lie one after another in one
  // storage (a single part, or consecutive views of one buffer) is its own
  // buffer.
  virtual void do_exchange(const std::vector<at::Tensor>& send_parts,
                           const std::vector<at::Tensor>& recv_parts);
};

// The world communicator of a registered backend ("local", "mpi", "nccl").
// "local" is only available inside `run_ranks` (local_communicator.h).
std::shared_ptr<Communicator> make_world_communicator(std::string_view backend);

// Names of the backends compiled into this build, e.g. {"local", "mpi"}.
std::vector<std::string> registered_backends();

// Extension point: makes a backend's world communicator known to
// make_world_communicator. Use through DTENSOR_REGISTER_COMMUNICATOR_BACKEND.
using WorldCommunicatorFactory = std::shared_ptr<Communicator> (*)();
bool register_communicator_backend(std::string_view name, WorldCommunicatorFactory factory);

}  // namespace dtensor

// Registers `factory` (a WorldCommunicatorFactory) under `name` at load time.
#define DTENSOR_REGISTER_COMMUNICATOR_BACKEND(name, factory)                             \
  static const bool dtensor_communicator_backend_registered_##factory [[maybe_unused]] = \
      ::dtensor::register_communicator_backend(name, factory)
