// Copyright 2026 The dtensor Authors.
//
// mesh/mpi_communicator.h: the "mpi" backend, CPU tensors across processes
// and hosts.
//
// An `MpiCommunicator` runs every collective of `Communicator` as the native
// MPI collective (MPI_Allreduce, MPI_Allgatherv, MPI_Reduce_scatter_block,
// MPI_Alltoallv, ...) straight on contiguous tensors' memory, with no
// staging copy. `exchange`'s parts travel as point-to-point messages whose
// derived datatypes describe the parts' strides, so MPI reads and writes
// them in place. The along-dim forms instead pack strided slices into (or
// receive them through) one pooled buffer around the contiguous collective,
// except an all_gather_v along a dim of less than 512 KiB: Open MPI moves a
// contiguous message with one copy but a strided datatype in pipelined
// fragments, so the packed form is faster from there on (4 ranks on 2
// cores: S(0) -> S(1) 2.6 vs 4.4 ms at 16 MiB, 52 vs 78 ms at 256 MiB; S(1)
// -> R 0.58 vs 0.77 ms at 1 MiB, but 290 vs 205 us at 256 KiB). Where every
// rank runs on one host and may read the others' memory
// (reads_peers_directly()), large moves skip the buffer, one copy instead
// of MPI's copy plus the pack or unpack (mesh/peer_memory.h): an
// all_gather_v along a dim of 2 MiB or more, in rows of 256 bytes or more,
// reads its peers' parts straight into their strided places (S(1) -> R,
// ratio to the raw all-gather at 16 MiB: 1.25-1.42 instead of 1.64-1.79; at
// 64 MiB 1.56-1.68 instead of 1.96-2.05); an all_to_all_v from a dim to an
// earlier one (S(0) -> S(1)) of 2 MiB or more, in rows of 512 bytes or
// more, writes its strided blocks straight into their places in the peers'
// outputs (rows of 1 KiB: 1.3-1.6x the raw all-to-all instead of 1.9-2.2x
// from 4 MiB); one to a later dim (S(1) -> S(0)) of 16 MiB or more, in rows
// of 1 KiB or more, reads the peers' blocks into strided places (about
// even with MPI's path on this 2-core machine).
// Start the program under `mpirun` and take the world communicator:
//
//   auto world = dtensor::MpiCommunicator::world();  // or make_world_communicator("mpi")
//   at::Tensor t = at::full({4}, world->rank());
//   world->all_reduce(t, dtensor::ReduceOp::kSum);
//
// or wrap a communicator that the application already has; the wrapper works
// on its own duplicate, so its traffic never mixes with the application's:
//
//   MPI_Comm_split(MPI_COMM_WORLD, color, key, &app_comm);
//   dtensor::MpiCommunicator comm(app_comm);
//
// MPI life cycle: `world()` initializes MPI (asking for MPI_THREAD_MULTIPLE)
// when nobody has, and then finalizes it at process exit; an application
// that initialized MPI itself also finalizes it itself. A communicator
// outliving MPI_Finalize is harmless: it no longer frees its handle.
//
// Reductions: every dtype that `check_reduce_op_supports` accepts, including
// bfloat16 and float16 (reduced in their own precision by user-defined MPI
// operations) and bool (max/min/band/bor/bxor). `kAvg` sums, then divides by
// size() locally.
//
// Limits: MPI counts are `int`. Reductions count elements; data movement
// counts bytes, so a piece of all_gather, scatter or broadcast, a message of
// all_to_all and a part of exchange must stay under 2 GiB. The `_v`
// variants (and the along-dim forms, which run on them) count a buffer past
// 2 GiB in the largest unit that divides each rank's part
// (mpi_internal::packed_layout), so they take it while every count and
// displacement in that unit fits in an int. A rank that finds a limit
// exceeded throws dtensor::Error before it sends anything; ranks whose own
// sizes fit cannot know and wait in the collective. MPI failures throw
// dtensor::Error with MPI's message (communicators made here use
// MPI_ERRORS_RETURN).
//
// Thread safety: distinct communicators may be used from distinct threads
// when MPI provides MPI_THREAD_MULTIPLE (`MpiCommunicator::thread_level()`);
// one communicator serves one thread at a time, as MPI requires.
#pragma once

// dtensor uses MPI's C interface only; keep Open MPI's and MPICH's deprecated
// C++ bindings out so nothing needs libmpi_cxx.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <dtensor/mesh/communicator.h>
#include "absl/functional/function_ref.h"
#include "absl/types/span.h"

namespace dtensor {

class MpiCommunicator final : public Communicator {
 public:
  // Wraps a duplicate of `comm` (MPI must be initialized). `comm` stays the
  // caller's to free; the duplicate is freed with this object.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;

  // The process-wide communicator over MPI_COMM_WORLD, created on first use
  // (initializing MPI if needed) and shared afterwards. Backs "mpi" in
  // make_world_communicator.
  static std::shared_ptr<MpiCommunicator> world();

  // The thread support MPI provided (MPI_THREAD_SINGLE ... MULTIPLE).
  static int thread_level();

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string_view backend_name() const override { return "mpi"; }
  // 4 processes on 2 cores over shared memory: ~150 us per small gather;
  // all_to_all_v 0.8-1.2x all_gather_v of the same bytes at 1-16 MiB.
  CollectiveCosts costs() const override { return {150.0, 1000.0, 1.0}; }
  c10::Device device() const override { return c10::Device(c10::kCPU); }

  // This object's own MPI communicator, e.g. to bootstrap another library on
  // the same group. Do not free it.
  MPI_Comm native_handle() const { return comm_; }

  // Whether large gathers along a dim (S(1) -> R) and all-to-alls between
  // two dims (S(0) -> S(1) and back) copy each part from where it lies
  // straight into its place, in this process or a peer (mesh/peer_memory.h),
  // instead of packing or unpacking through a buffer around MPI: true when
  // every rank runs on one host, the kernel lets each read and write the
  // others' memory (probed both ways), and no rank set
  // DTENSOR_MPI_DIRECT_READS=0 (the name says reads; it governs the writes
  // too). Decided once, by every rank together: the first call is
  // collective (the first such gather or all-to-all makes it otherwise).
  bool reads_peers_directly();
  // How many gathers along a dim this communicator made by direct reads,
  // and how many all-to-alls between two dims by direct reads or writes (a
  // copy that fails on any rank sends that call through MPI instead,
  // uncounted).
  int64_t gathers_by_direct_reads() const { return gathers_by_direct_reads_; }
  int64_t all_to_alls_by_direct_copies() const { return all_to_alls_by_direct_copies_; }

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
  void do_exchange(const std::vector<at::Tensor>& send_parts,
                   const std::vector<at::Tensor>& recv_parts) override;
  void do_all_gather_v_along(const at::Tensor& input, at::Tensor& output,
                             const std::vector<int64_t>& sizes_per_rank, int64_t dim) override;
  void do_all_to_all_v_along(const at::Tensor& input, const std::vector<int64_t>& send_sizes,
                             int64_t send_dim, at::Tensor& output,
                             const std::vector<int64_t>& recv_sizes, int64_t recv_dim) override;
  void do_broadcast(at::Tensor& tensor, int root) override;
  void do_scatter(const at::Tensor& input, at::Tensor& output, int root) override;
  void do_send(const at::Tensor& tensor, int peer, int tag) override;
  void do_recv(at::Tensor& tensor, int peer, int tag) override;
  void do_barrier() override;
  std::shared_ptr<Communicator> do_split(int color, int key) override;

 private:
  struct Adopt {};
  // Takes ownership of `comm` as is (results of MPI_Comm_split).
  MpiCommunicator(Adopt, MPI_Comm comm);

  // Divides by size() after a kAvg reduction went through MPI as a sum.
  void finish_average(at::Tensor& tensor, ReduceOp op) const;

  // Every rank posts where its output (`post_output`, which peers write) or
  // its input (which peers read) is: MPI_Allgather of {usable, address,
  // bytes}. Then each runs `copy` on what all posted, and agrees with the
  // others that every copy succeeded: false, on every rank alike, when some
  // rank's tensors are not plain CPU memory or its posted one is not
  // contiguous, or a copy fails (then the output is to be filled another
  // way). An exception in `copy` counts as a failed copy.
  bool copy_with_posted(const at::Tensor& input, const at::Tensor& output, bool post_output,
                        absl::FunctionRef<bool(const std::vector<int64_t>& posted)> copy);
  // do_all_gather_v_along and do_all_to_all_v_along by direct reads (or
  // writes), through copy_with_posted.
  bool gather_along_by_reading(const at::Tensor& input, at::Tensor& output,
                               const std::vector<int64_t>& sizes_per_rank, int64_t dim);
  // `writes`: each rank writes its blocks into its peers' outputs, else
  // reads its peers' blocks of their inputs.
  bool all_to_all_along_directly(const at::Tensor& input, const std::vector<int64_t>& send_sizes,
                                 int64_t send_dim, at::Tensor& output,
                                 const std::vector<int64_t>& recv_sizes, int64_t recv_dim,
                                 bool writes);
  // Whether every rank's "ok" is true; also what keeps each rank's posted
  // tensor alive (and a written one unread) until its peers are done.
  bool all_agree(bool ok);
  // Every rank's `words`, rank after rank (the same count on every rank).
  std::vector<int64_t> all_gather_words(absl::Span<const int64_t> words);

  MPI_Comm comm_ = MPI_COMM_NULL;
  // A duplicate of comm_ for exchange's point-to-point messages, so they
  // never match a user's send/recv; made by the first exchange.
  MPI_Comm exchange_comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 0;
  // reads_peers_directly()'s answer once made, and each rank's process id.
  std::optional<bool> peers_readable_;
  std::vector<int64_t> peer_pids_;
  int64_t gathers_by_direct_reads_ = 0;
  int64_t all_to_alls_by_direct_copies_ = 0;
};

namespace mpi_internal {

// `value` as an MPI count; throws dtensor::Error naming `call` and `what`
// when it does not fit in an int.
int to_mpi_count(int64_t value, std::string_view call, std::string_view what);

// The counts and displacements of a packed `_v` buffer (rank p's part:
// `numel_per_rank[p]` elements of `element_size` bytes, parts one after
// another) as MPI takes them: ints, in units of `unit` bytes. The unit is
// one byte while the whole buffer's bytes fit in an int, else the largest
// that divides every part's bytes, so a buffer past 2 GiB goes through
// while its counts in that unit fit (else throws naming `call`). Every rank
// may choose its own unit: MPI matches messages by their sequence of bytes,
// whatever datatype each side names, so no rank needs to know another's
// sizes.
struct PackedLayout {
  int64_t unit = 1;
  std::vector<int> counts;
  std::vector<int> displacements;
};
PackedLayout packed_layout(const std::vector<int64_t>& numel_per_rank, int64_t element_size,
                           std::string_view call);

}  // namespace mpi_internal
}  // namespace dtensor
