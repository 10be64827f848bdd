// Copyright 2026 The dtensor Authors.
#include <dtensor/mesh/local_communicator.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <sstream>
#include <thread>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>

#include <dtensor/base/check.h>
#include <dtensor/mesh/row_copy.h>
#include "absl/cleanup/cleanup.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_join.h"

namespace dtensor {
namespace {

using Clock = std::chrono::steady_clock;

// The world rank of the calling run_ranks thread; failures are reported by
// world rank whichever sub-group they happen in.
thread_local int current_world_rank = -1;
// How often a waiting rank looks for an abort; the wake-up on progress is
// immediate, so this only bounds how late a failure elsewhere is noticed.
constexpr auto kAbortPollInterval = std::chrono::milliseconds(20);
// How long a rank that reached a barrier first polls for the others before
// it sleeps: long enough for a small collective's peers to arrive, short
// enough that a rank waiting on others' computation soon gives its core back.
constexpr auto kPollBeforeSleeping = std::chrono::microseconds(200);

std::chrono::seconds timeout_from_environment() {
  const char* value = std::getenv("DTENSOR_LOCAL_TIMEOUT_SECONDS");
  if (value == nullptr || *value == '\0') return std::chrono::seconds(300);
  char* end = nullptr;
  const long seconds = std::strtol(value, &end, 10);
  DTENSOR_CHECK(end != value && *end == '\0' && seconds > 0,
                "DTENSOR_LOCAL_TIMEOUT_SECONDS: expected a positive whole number of seconds, "
                "found \"",
                value, "\"");
  return std::chrono::seconds(seconds);
}

// Failure state shared by every group of one run_ranks world, so a rank that
// fails releases peers waiting in any sub-group too.
class WorldFailure {
 public:
  bool failed() const { return failed_.load(std::memory_order_acquire); }

  // Records the first failure; later ones are consequences of it.
  void fail(int rank, std::string reason) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (failed_.load(std::memory_order_relaxed)) return;
    first_rank_ = rank;
    reason_ = std::move(reason);
    failed_.store(true, std::memory_order_release);
  }

  int first_rank() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_rank_;
  }

  // A rank whose function returned can join no collective any more.
  void finish(int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    finished_.push_back(rank);
    any_finished_.store(true, std::memory_order_release);
  }

  // The first of `ranks` whose function has returned, or -1.
  int first_finished_of(const std::vector<int>& ranks) const {
    if (!any_finished_.load(std::memory_order_acquire)) return -1;
    std::lock_guard<std::mutex> lock(mutex_);
    for (int rank : finished_) {
      if (std::find(ranks.begin(), ranks.end(), rank) != ranks.end()) return rank;
    }
    return -1;
  }

  [[noreturn]] void throw_failure(std::string_view waiting_in) const {
    std::lock_guard<std::mutex> lock(mutex_);
    DTENSOR_CHECK(false, "local backend: world rank ", first_rank_, " failed while this rank ",
                  "waited in ", waiting_in, ": ", reason_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::atomic<bool> any_finished_{false};
  mutable std::mutex mutex_;
  int first_rank_ = -1;
  std::string reason_;
  std::vector<int> finished_;
};

// What one rank asked for in the current collective; every rank posts one and
// reads the others' between the group's barriers.
struct PostedCall {
  explicit PostedCall(std::string_view name = "") : call(name) {}

  std::string_view call;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  int root = -1;
  int op = -1;
  int64_t numel = 0;  // of the tensor the call is named after (input or tensor)
  at::Tensor input;   // flattened, except in the *_along calls
  at::Tensor output;  // all_to_all_along: where the senders of row copies write
  // Element counts; in the *_along calls, slice counts along the dims below.
  std::vector<int64_t> send_numel;
  std::vector<int64_t> recv_numel;
  int64_t send_dim = -1;  // all_gather_along: the gathered dim; all_to_all_along: the cut ones
  int64_t recv_dim = -1;
  std::vector<int64_t> output_shape;   // *_along calls
  std::vector<at::Tensor> send_parts;  // exchange: the part for each rank
  std::vector<at::Tensor> recv_parts;  // exchange: the place for each rank's part
  at::Tensor partial_result;           // all_reduce: the chunk this rank reduced
  int color = -1;
  int key = 0;
  std::shared_ptr<void> new_group;  // split: set by each new group's leader
};

std::string describe(const PostedCall& c) {
  std::ostringstream out;
  out << c.call << "(dtype " << c.dtype << ", " << c.numel << " elements";
  if (c.root >= 0) out << ", root " << c.root;
  if (c.op >= 0) out << ", op " << reduce_op_name(static_cast<ReduceOp>(c.op));
  if (!c.send_numel.empty()) out << ", send [" << absl::StrJoin(c.send_numel, ",") << "]";
  if (!c.recv_numel.empty()) out << ", recv [" << absl::StrJoin(c.recv_numel, ",") << "]";
  if (c.send_dim >= 0) out << ", dim " << c.send_dim;
  if (c.recv_dim >= 0) out << ", recv dim " << c.recv_dim;
  if (!c.output_shape.empty()) out << ", output [" << absl::StrJoin(c.output_shape, ",") << "]";
  out << ")";
  return out.str();
}

class LocalGroup {
 public:
  // `world_ranks`: the run_ranks rank of each member, in group rank order.
  LocalGroup(std::vector<int> world_ranks, std::shared_ptr<WorldFailure> failure,
             std::chrono::seconds timeout)
      : size_(static_cast<int>(world_ranks.size())),
        world_ranks_(std::move(world_ranks)),
        failure_(std::move(failure)),
        timeout_(timeout),
        posted_(size_) {}

  int size() const { return size_; }
  const std::vector<int>& world_ranks() const { return world_ranks_; }
  const std::shared_ptr<WorldFailure>& failure() const { return failure_; }
  std::chrono::seconds timeout() const { return timeout_; }
  PostedCall& slot(int rank) { return posted_[rank]; }
  const std::vector<PostedCall>& posted() const { return posted_; }

  // A barrier of the group's ranks. Lock-free on the way in; a rank that
  // arrives early polls (yielding its core: ranks may outnumber cores) for up
  // to kPollBeforeSleeping before it sleeps. A sleep and its wake-up cost
  // tens of microseconds where ranks outnumber cores, more than a small
  // collective's whole data movement.
  void arrive_and_wait(std::string_view call) {
    if (failure_->failed()) failure_->throw_failure(call);
    // Read before arriving: it cannot move on until this rank has arrived.
    const uint64_t generation = generation_.load(std::memory_order_relaxed);
    // acq_rel: the last to arrive sees every rank's posted call, and passes
    // them on to the others through the generation.
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == size_) {
      // Relaxed: the next barrier's ranks arrive only after they see the
      // generation move, which this store precedes.
      arrived_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_seq_cst);
      wake_sleepers();
      return;
    }
    const auto passed = [&] { return generation_.load(std::memory_order_seq_cst) != generation; };
    const auto poll_until = Clock::now() + kPollBeforeSleeping;
    for (;;) {
      const bool failed = failure_->failed();  // read before `passed`: see wait_until
      if (passed()) return;
      if (failed) failure_->throw_failure(call);
      if (Clock::now() > poll_until) {
        sleep_until(call, passed);
        return;
      }
      std::this_thread::yield();
    }
  }

  void post_message(int src, int dst, int tag, at::Tensor payload) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      mailbox_[{src, dst, tag}].push_back(std::move(payload));
    }
    progress_.notify_all();
  }

  at::Tensor take_message(int src, int dst, int tag) {
    const std::tuple<int, int, int> key{src, dst, tag};
    std::unique_lock<std::mutex> lock(mutex_);
    // Looked up afresh after every wake-up: a send to another key may rehash
    // the map while this rank waits.
    auto has_message = [&] {
      auto it = mailbox_.find(key);
      return it != mailbox_.end() && !it->second.empty();
    };
    wait_until(lock, "recv", has_message);
    auto it = mailbox_.find(key);
    at::Tensor payload = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) mailbox_.erase(it);
    return payload;
  }

 private:
  // Sleeps until `ready`, counted in sleepers_ so that whoever makes it true
  // wakes the sleepers. Both sides order through seq_cst: either the sleeper
  // sees `ready` (checked under the mutex after counting itself) or the
  // waker sees the sleeper and notifies once it waits (it takes the mutex
  // first).
  template <typename Ready>
  void sleep_until(std::string_view call, Ready ready) {
    std::unique_lock<std::mutex> lock(mutex_);
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const absl::Cleanup awake = [this] { sleepers_.fetch_sub(1, std::memory_order_relaxed); };
    wait_until(lock, call, ready);
  }

  void wake_sleepers() {
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return;
    { const std::lock_guard<std::mutex> lock(mutex_); }
    progress_.notify_all();
  }

  template <typename Ready>
  void wait_until(std::unique_lock<std::mutex>& lock, std::string_view call, Ready ready) {
    const auto deadline = Clock::now() + timeout_;
    while (!ready()) {
      progress_.wait_for(lock, kAbortPollInterval);
      // A barrier's generation moves without the mutex, so a peer may see it
      // move, leave, and return from its function or fail between a look at
      // `ready` and one at the peers: the peers are read first, then `ready`
      // (which then sees the move that let them go).
      const bool failed = failure_->failed();
      const int gone = failure_->first_finished_of(world_ranks_);
      if (ready()) break;
      if (failed) failure_->throw_failure(call);
      DTENSOR_CHECK(gone < 0, "local backend: ", call, ": expected every rank of the group to ",
                    "join, found world rank ", gone,
                    " returned from its run_ranks function; ranks must make the same "
                    "collective calls");
      if (Clock::now() > deadline) {
        std::ostringstream reason;
        reason << "timed out after " << timeout_.count() << " s in " << call
               << " (a rank never joined it; raise DTENSOR_LOCAL_TIMEOUT_SECONDS if it is slow)";
        failure_->fail(current_world_rank, reason.str());
        DTENSOR_CHECK(false, "local backend: ", reason.str());
      }
    }
  }

  const int size_;
  const std::vector<int> world_ranks_;
  const std::shared_ptr<WorldFailure> failure_;
  const std::chrono::seconds timeout_;
  std::vector<PostedCall> posted_;
  std::mutex mutex_;
  std::condition_variable progress_;
  std::atomic<int> arrived_{0};
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> sleepers_{0};  // ranks asleep in a barrier (sleep_until)
  absl::flat_hash_map<std::tuple<int, int, int>, std::deque<at::Tensor>> mailbox_;
};

at::Tensor flat(const at::Tensor& t) { return t.reshape({-1}); }

std::vector<int64_t> offsets_of(const std::vector<int64_t>& numel) {
  std::vector<int64_t> offsets(numel.size() + 1, 0);
  for (size_t i = 0; i < numel.size(); ++i) offsets[i + 1] = offsets[i] + numel[i];
  return offsets;
}

// Every rank's input, in rank order, laid along `dim` of `out`. One cat
// writes each row's parts in turn, faster than a strided copy per part
// (benchmarks/RESULTS.md at 390419a); an input inside `out` (an in-place gather) is
// copied part by part, which cat refuses.
void concatenate(const std::vector<PostedCall>& posted, at::Tensor& out, int64_t dim) {
  std::vector<at::Tensor> parts;
  parts.reserve(posted.size());
  bool in_place = false;
  for (const PostedCall& peer : posted) {
    parts.push_back(peer.input);
    in_place = in_place || peer.input.is_alias_of(out);
  }
  if (!in_place) {
    at::cat_out(out, parts, dim);
    return;
  }
  int64_t offset = 0;
  for (const at::Tensor& part : parts) {
    out.narrow(dim, offset, part.size(dim)).copy_(part);
    offset += part.size(dim);
  }
}

// out = a (op) b, elementwise; `out` may be `a` or `b`.
void reduce_pair(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      at::add_out(out, a, b);
      return;
    case ReduceOp::kMax:
      at::maximum_out(out, a, b);
      return;
    case ReduceOp::kMin:
      at::minimum_out(out, a, b);
      return;
    case ReduceOp::kProduct:
      at::mul_out(out, a, b);
      return;
    case ReduceOp::kBand:
      at::bitwise_and_out(out, a, b);
      return;
    case ReduceOp::kBor:
      at::bitwise_or_out(out, a, b);
      return;
    case ReduceOp::kBxor:
      at::bitwise_xor_out(out, a, b);
      return;
  }
}

// out = the reduction over every rank of elements [begin, begin + out.numel())
// of its posted input. `out` is written before every input is read, so it
// must not overlap them.
void reduce_ranks(at::Tensor out, const std::vector<PostedCall>& posted, int64_t begin,
                  ReduceOp op) {
  const auto term = [&](size_t p) { return posted[p].input.narrow(0, begin, out.numel()); };
  if (posted.size() == 1) {
    out.copy_(term(0));
    return;
  }
  reduce_pair(out, term(0), term(1), op);
  for (size_t p = 2; p < posted.size(); ++p) reduce_pair(out, out, term(p), op);
  if (op == ReduceOp::kAvg) out.div_(static_cast<int64_t>(posted.size()));
}

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  std::string_view backend_name() const override { return "local"; }
  // 4 threads on 2 cores: ~15 us per small gather, ~2 GB/s per sending rank;
  // all_to_all_v 1.1-1.5x all_gather_v of the same bytes at 16 KiB-1 MiB
  // (collective_bench).
  CollectiveCosts costs() const override { return {15.0, 2000.0, 1.3}; }
  c10::Device device() const override { return c10::Device(c10::kCPU); }

 protected:
  void do_all_reduce(const at::Tensor& input, at::Tensor& output, ReduceOp op) override {
    PostedCall call = make_call("all_reduce", input);
    call.op = static_cast<int>(op);
    call.input = flat(input);
    at::Tensor out = flat(output);
    const bool in_place = input.data_ptr() == output.data_ptr();
    run(std::move(call), [&](const std::vector<PostedCall>& posted) {
      // Each rank reduces one chunk from everyone, then all copy every chunk.
      const int64_t numel = posted[rank_].numel;
      const int64_t chunk = (numel + size() - 1) / size();
      const auto chunk_begin = [&](int p) { return std::min(numel, chunk * p); };
      const int64_t begin = chunk_begin(rank_);
      const int64_t length = std::min(numel, begin + chunk) - begin;
      // In place, peers still read this chunk of the tensor: reduce into
      // scratch memory kept across calls. Out of place, straight into output.
      at::Tensor mine = in_place ? scratch(length, out.options()) : out.narrow(0, begin, length);
      reduce_ranks(mine, posted, begin, op);
      group_->slot(rank_).partial_result = mine;
      group_->arrive_and_wait("all_reduce");
      for (int p = 0; p < size(); ++p) {
        if (p == rank_ && !in_place) continue;
        const at::Tensor& part = posted[p].partial_result;
        out.narrow(0, chunk_begin(p), part.numel()).copy_(part);
      }
    });
  }

  void do_all_gather(const at::Tensor& input, at::Tensor& output) override {
    do_all_gather_v(input, output, std::vector<int64_t>(size(), input.numel()));
  }

  void do_all_gather_v(const at::Tensor& input, at::Tensor& output,
                       const std::vector<int64_t>& numel_per_rank) override {
    PostedCall call = make_call("all_gather", input);
    call.input = flat(input);
    call.recv_numel = numel_per_rank;
    at::Tensor out = flat(output);
    run(std::move(call),
        [&](const std::vector<PostedCall>& posted) { concatenate(posted, out, 0); });
  }

  void do_reduce_scatter(const at::Tensor& input, at::Tensor& output, ReduceOp op) override {
    do_reduce_scatter_v(input, output, std::vector<int64_t>(size(), output.numel()), op);
  }

  void do_reduce_scatter_v(const at::Tensor& input, at::Tensor& output,
                           const std::vector<int64_t>& numel_per_rank, ReduceOp op) override {
    PostedCall call = make_call("reduce_scatter", input);
    call.op = static_cast<int>(op);
    call.input = flat(input);
    call.recv_numel = numel_per_rank;
    at::Tensor out = flat(output);
    run(std::move(call), [&](const std::vector<PostedCall>& posted) {
      reduce_ranks(out, posted, offsets_of(numel_per_rank)[rank_], op);
    });
  }

  void do_all_to_all(const at::Tensor& input, at::Tensor& output) override {
    const std::vector<int64_t> block(size(), input.numel() / size());
    do_all_to_all_v(input, block, output, block);
  }

  void do_all_to_all_v(const at::Tensor& input, const std::vector<int64_t>& send_numel,
                       at::Tensor& output, const std::vector<int64_t>& recv_numel) override {
    PostedCall call = make_call("all_to_all", input);
    call.input = flat(input);
    call.send_numel = send_numel;
    call.recv_numel = recv_numel;
    at::Tensor out = flat(output);
    run(std::move(call), [&](const std::vector<PostedCall>& posted) {
      const std::vector<int64_t> recv_offsets = offsets_of(recv_numel);
      for (int p = 0; p < size(); ++p) {
        const int64_t send_offset = offsets_of(posted[p].send_numel)[rank_];
        out.narrow(0, recv_offsets[p], recv_numel[p])
            .copy_(posted[p].input.narrow(0, send_offset, recv_numel[p]));
      }
    });
  }

  // Each peer's part is copied straight into its strided place in `output`.
  void do_all_gather_v_along(const at::Tensor& input, at::Tensor& output,
                             const std::vector<int64_t>& sizes_per_rank, int64_t dim) override {
    PostedCall call = make_call("all_gather_along", input);
    call.input = input;
    call.recv_numel = sizes_per_rank;
    call.send_dim = dim;
    call.output_shape = output.sizes().vec();
    run(std::move(call),
        [&](const std::vector<PostedCall>& posted) { concatenate(posted, output, dim); });
  }

  // Each peer's slices are copied from its input straight into place: no
  // packing, no unpacking. A part whose rows lie apart in its sender's input
  // (S(0) -> S(1): a column block) is written by the sender, into its
  // receiver's output, row by row across all its receivers: one pass over
  // the sender's rows, where each receiver reading its block would pass over
  // them once each at a stride (mesh/row_copy.h). The receiver copies every
  // other part. Both decide alike from the posted tensors alone.
  void do_all_to_all_v_along(const at::Tensor& input, const std::vector<int64_t>& send_sizes,
                             int64_t send_dim, at::Tensor& output,
                             const std::vector<int64_t>& recv_sizes, int64_t recv_dim) override {
    PostedCall call = make_call("all_to_all_along", input);
    call.input = input;
    call.output = output;
    call.send_numel = send_sizes;
    call.recv_numel = recv_sizes;
    call.send_dim = send_dim;
    call.recv_dim = recv_dim;
    call.output_shape = output.sizes().vec();
    run(std::move(call), [&](const std::vector<PostedCall>& posted) {
      std::vector<std::vector<int64_t>> send_offsets, recv_offsets;
      for (const PostedCall& peer : posted) {
        send_offsets.push_back(offsets_of(peer.send_numel));
        recv_offsets.push_back(offsets_of(peer.recv_numel));
      }
      // The part rank p sends rank q, as the sender copies it; nullopt when
      // the receiver copies it.
      const auto sent_by_rows = [&](int p, int q) -> std::optional<RowCopy> {
        std::optional<RowCopy> rows = row_copy_of(
            StridedPart{posted[p].input, send_dim, send_offsets[p][q], posted[p].send_numel[q]},
            StridedPart{posted[q].output, recv_dim, recv_offsets[q][p], posted[q].recv_numel[p]});
        if (rows && rows->source_step == rows->run_bytes) return std::nullopt;  // rows adjoin
        return rows;
      };
      std::vector<RowCopy> sent;
      for (int q = 0; q < size(); ++q) {
        if (std::optional<RowCopy> rows = sent_by_rows(rank_, q)) sent.push_back(*rows);
      }
      copy_rows_interleaved(sent);
      for (int p = 0; p < size(); ++p) {
        if (sent_by_rows(p, rank_)) continue;
        output.narrow(recv_dim, recv_offsets[rank_][p], recv_sizes[p])
            .copy_(posted[p].input.narrow(send_dim, send_offsets[p][rank_],
                                          posted[p].send_numel[rank_]));
      }
    });
  }

  // Each peer's part is copied from wherever it lies straight into place.
  void do_exchange(const std::vector<at::Tensor>& send_parts,
                   const std::vector<at::Tensor>& recv_parts) override {
    PostedCall call = make_call("exchange", send_parts[0]);
    call.send_parts = send_parts;
    call.recv_parts = recv_parts;
    run(std::move(call), [&](const std::vector<PostedCall>& posted) {
      for (int q = 0; q < size(); ++q) recv_parts[q].copy_(posted[q].send_parts[rank_]);
    });
  }

  void do_broadcast(at::Tensor& tensor, int root) override {
    PostedCall call = make_call("broadcast", tensor);
    call.root = root;
    call.input = flat(tensor);
    run(std::move(call), [&](const std::vector<PostedCall>& posted) {
      if (rank_ != root) flat(tensor).copy_(posted[root].input);
    });
  }

  void do_scatter(const at::Tensor& input, at::Tensor& output, int root) override {
    PostedCall call = make_call("scatter", output);
    call.root = root;
    if (rank_ == root) call.input = flat(input);
    run(std::move(call), [&](const std::vector<PostedCall>& posted) {
      const int64_t block = output.numel();
      flat(output).copy_(posted[root].input.narrow(0, block * rank_, block));
    });
  }

  void do_send(const at::Tensor& tensor, int peer, int tag) override {
    // Buffered: the send completes at once, so send/recv orderings that work
    // with a buffering MPI also work here.
    group_->post_message(rank_, peer, tag, tensor.clone());
  }

  void do_recv(at::Tensor& tensor, int peer, int tag) override {
    at::Tensor payload = group_->take_message(peer, rank_, tag);
    DTENSOR_CHECK(
        payload.scalar_type() == tensor.scalar_type() && payload.numel() == tensor.numel(),
        "recv from rank ", peer, " (tag ", tag, "): expected ", tensor.numel(), " elements of ",
        tensor.scalar_type(), ", found a message of ", payload.numel(), " elements of ",
        payload.scalar_type());
    flat(tensor).copy_(flat(payload));
  }

  void do_barrier() override {
    run(PostedCall("barrier"), [](const std::vector<PostedCall>&) {});
  }

  std::shared_ptr<Communicator> do_split(int color, int key) override {
    PostedCall call("split");
    call.color = color;
    call.key = key;
    std::shared_ptr<Communicator> result;
    run(std::move(call), [&](const std::vector<PostedCall>& posted) {
      std::vector<int> members = members_of(posted, color);
      if (color >= 0 && members.front() == rank_) {
        std::vector<int> world_ranks;
        for (int member : members) world_ranks.push_back(group_->world_ranks()[member]);
        group_->slot(rank_).new_group = std::make_shared<LocalGroup>(
            std::move(world_ranks), group_->failure(), group_->timeout());
      }
      group_->arrive_and_wait("split");
      if (color < 0) return;
      auto group = std::static_pointer_cast<LocalGroup>(posted[members.front()].new_group);
      const int new_rank =
          static_cast<int>(std::find(members.begin(), members.end(), rank_) - members.begin());
      result = std::make_shared<LocalCommunicator>(std::move(group), new_rank);
    });
    return result;
  }

 private:
  PostedCall make_call(std::string_view name, const at::Tensor& named_tensor) const {
    PostedCall call(name);
    call.dtype = named_tensor.scalar_type();
    call.numel = named_tensor.numel();
    return call;
  }

  // Members of `color`'s new group in their new rank order: by key, then rank.
  static std::vector<int> members_of(const std::vector<PostedCall>& posted, int color) {
    std::vector<int> members;
    for (int p = 0; p < static_cast<int>(posted.size()); ++p) {
      if (posted[p].color == color) members.push_back(p);
    }
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return posted[a].key < posted[b].key; });
    return members;
  }

  // Post, wait for everyone, check that all ranks asked for the same thing,
  // move the data, and wait again so no rank reuses a buffer a peer still reads.
  // Then the slot lets go of the call's tensors: no peer reads them any
  // more, and the caller may be waiting for their memory.
  template <typename Body>
  void run(PostedCall call, Body body) {
    const std::string_view name = call.call;
    group_->slot(rank_) = std::move(call);
    group_->arrive_and_wait(name);
    check_ranks_agree(group_->posted());
    body(group_->posted());
    group_->arrive_and_wait(name);
    group_->slot(rank_) = PostedCall();
  }

  // Every rank runs this on the same posted calls, so all reach one verdict
  // and throw together rather than deadlock.
  void check_ranks_agree(const std::vector<PostedCall>& posted) const {
    const PostedCall& first = posted[0];
    for (int p = 1; p < size(); ++p) {
      const PostedCall& other = posted[p];
      bool same = other.call == first.call && other.dtype == first.dtype &&
                  other.root == first.root && other.op == first.op;
      if (same && first.call == "all_reduce") same = other.numel == first.numel;
      if (same && first.call == "broadcast") same = other.numel == first.numel;
      if (same && (first.call == "all_gather" || first.call == "reduce_scatter")) {
        same = other.recv_numel == first.recv_numel;
      }
      if (same && first.call == "scatter") same = other.numel == first.numel;
      if (same && first.call == "all_gather_along") {
        same = other.recv_numel == first.recv_numel && other.send_dim == first.send_dim &&
               other.output_shape == first.output_shape;
      }
      if (same && first.call == "all_to_all_along") {
        same = other.send_dim == first.send_dim && other.recv_dim == first.recv_dim;
      }
      DTENSOR_CHECK(same, "local backend: ranks disagree on a collective: rank 0 called ",
                    describe(first), ", rank ", p, " called ", describe(other));
    }
    if (first.call == "all_to_all") check_messages_match(posted);
    if (first.call == "all_to_all_along") check_parts_match(posted);
    if (first.call == "exchange") check_exchanged_shapes(posted);
  }

  void check_exchanged_shapes(const std::vector<PostedCall>& posted) const {
    for (int q = 0; q < size(); ++q) {
      for (int p = 0; p < size(); ++p) {
        const at::Tensor& sent = posted[q].send_parts[p];
        const at::Tensor& place = posted[p].recv_parts[q];
        const bool both_empty = sent.numel() == 0 && place.numel() == 0;
        DTENSOR_CHECK(both_empty || sent.sizes() == place.sizes(), "local backend: exchange: rank ",
                      q, " sends rank ", p, " a part of shape ", sent.sizes(),
                      ", which expects shape ", place.sizes());
      }
    }
  }

  void check_messages_match(const std::vector<PostedCall>& posted) const {
    for (int q = 0; q < size(); ++q) {
      for (int p = 0; p < size(); ++p) {
        DTENSOR_CHECK(posted[q].send_numel[p] == posted[p].recv_numel[q],
                      "local backend: all_to_all: rank ", q, " sends ", posted[q].send_numel[p],
                      " elements to rank ", p, ", which expects ", posted[p].recv_numel[q]);
      }
    }
  }

  // What rank q sends rank p must have the shape of where p puts it.
  void check_parts_match(const std::vector<PostedCall>& posted) const {
    for (int q = 0; q < size(); ++q) {
      for (int p = 0; p < size(); ++p) {
        const std::vector<int64_t> sent =
            shape_with(posted[q].input.sizes(), posted[q].send_dim, posted[q].send_numel[p]);
        const std::vector<int64_t> place =
            shape_with(posted[p].output_shape, posted[p].recv_dim, posted[p].recv_numel[q]);
        DTENSOR_CHECK(sent == place, "local backend: all_to_all_v: rank ", q, " sends rank ", p,
                      " a part of shape [", absl::StrJoin(sent, ","), "], which expects shape [",
                      absl::StrJoin(place, ","), "]");
      }
    }
  }

  // `length` elements of memory this rank keeps across calls (grown on demand).
  at::Tensor scratch(int64_t length, const at::TensorOptions& options) {
    if (!scratch_.defined() || scratch_.dtype() != options.dtype() || scratch_.numel() < length) {
      scratch_ = at::empty({length}, options);
    }
    return scratch_.narrow(0, 0, length);
  }

  std::shared_ptr<LocalGroup> group_;
  int rank_;
  at::Tensor scratch_;  // see scratch()
};

thread_local std::shared_ptr<Communicator> current_local_world;

std::shared_ptr<Communicator> local_world_factory() { return local_world(); }

DTENSOR_REGISTER_COMMUNICATOR_BACKEND("local", local_world_factory);

std::string describe_exception(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

std::shared_ptr<Communicator> local_world() {
  DTENSOR_CHECK(current_local_world != nullptr,
                "local backend: expected to be called on a rank thread of dtensor::run_ranks, "
                "found a thread outside it");
  return current_local_world;
}

void run_ranks(int world_size, const std::function<void(int rank)>& fn) {
  DTENSOR_CHECK(world_size >= 1, "run_ranks: world_size: expected at least 1, found ", world_size);
  auto failure = std::make_shared<WorldFailure>();
  std::vector<int> world_ranks(world_size);
  std::iota(world_ranks.begin(), world_ranks.end(), 0);
  auto group =
      std::make_shared<LocalGroup>(std::move(world_ranks), failure, timeout_from_environment());
  std::vector<std::exception_ptr> errors(world_size);
  std::vector<std::thread> threads;
  threads.reserve(world_size);
  for (int rank = 0; rank < world_size; ++rank) {
    threads.emplace_back([&, rank] {
      current_world_rank = rank;
      current_local_world = std::make_shared<LocalCommunicator>(group, rank);
      try {
        fn(rank);
      } catch (...) {
        errors[rank] = std::current_exception();
        failure->fail(rank, describe_exception(errors[rank]));
      }
      failure->finish(rank);
      current_local_world.reset();
    });
  }
  for (std::thread& thread : threads) thread.join();
  if (failure->failed()) std::rethrow_exception(errors[failure->first_rank()]);
}

}  // namespace dtensor
