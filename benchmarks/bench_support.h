// Copyright 2026 The dtensor Authors.
//
// benchmarks/bench_support.h: what the Google Benchmark programs of
// benchmarks/ share (collective_bench, redistribute_bench).
//
//  * Ranks: a RankContext per rank, exact timing of a collective call (barrier,
//    time the call, device sync, all_reduce(max) of the elapsed seconds).
//  * Raw collectives: buffers and calls of every Communicator collective on
//    float32 tensors, with the nccl-tests busbw factors.
//  * Running Google Benchmark over ranks: on "local" the ranks are threads of
//    one run_ranks call that lives for the whole program; rank 0's thread runs
//    Google Benchmark and, before each run, announces a Command (which case,
//    size, iterations) that ranks 1..n-1 follow, until rank 0 announces
//    "quit". Under mpirun every rank runs Google Benchmark itself: the
//    iteration count follows from the manual time, which is the all-reduced
//    max and thus identical everywhere, and each announcement checks that all
//    ranks agree. Only rank 0 prints.
//  * The command line: --backend=local|mpi|nccl (default local) and
//    --ranks=N (local only, default 4); everything else goes to Google
//    Benchmark.
//  * The training-step programs (llama_step_bench, fsdp_step_bench, with
//    their own mains): per-step collective tallies and their --json output.
//
// A program subclasses BenchRank and calls bench_main:
//
//   class MyRank final : public dtensor::bench::BenchRank {
//     void register_benchmarks() override;              // rank 0 (local), every rank (mpi)
//     void follow(const dtensor::bench::Command&) override;  // local ranks 1..n-1
//     std::string describe(const dtensor::bench::Command&) const override;
//   };
//   int main(int argc, char** argv) {
//     return dtensor::bench::bench_main(argc, argv, {"my_bench", [](const auto& ctx) {
//       return std::make_unique<MyRank>(ctx); }});
//   }
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>

#include <dtensor/mesh/communicator.h>
#include <dtensor/redistribute/planner.h>

namespace dtensor::bench {

// ---------------------------------------------------------------------------
// Ranks.

// What one rank benchmarks with.
struct RankContext {
  std::shared_ptr<Communicator> comm;  // the world
  at::TensorOptions options;           // float32 on comm->device()
  // True under mpirun: every rank runs Google Benchmark and decides itself.
  bool every_rank_decides = false;
  std::string program;  // e.g. "collective_bench": prefixes error messages
};

RankContext make_context(std::shared_ptr<Communicator> comm, bool every_rank_decides,
                         std::string program);

inline int rank_of(const RankContext& ctx) { return ctx.comm->rank(); }
inline int size_of(const RankContext& ctx) { return ctx.comm->size(); }

// Waits for the device work of this process, so the clock covers the whole
// collective and not just its launch. CPU collectives are synchronous.
void synchronize_device(const RankContext& ctx);

// The max of `value` over the ranks of ctx.comm, on every rank.
double max_over_ranks(const RankContext& ctx, double value);

// Throws on every rank unless every rank runs on this host (the same boot
// id): time_span_over_ranks compares clock readings across ranks.
void check_one_host(const RankContext& ctx);

// Seconds of one `call()`, the max over ranks (every rank gets the same
// value). The barrier lines ranks up so the clock measures the call, not the
// skew left by the previous iteration's max reduction; the barrier and the
// max reduction are outside the timed region. For collectives, which line
// the ranks up themselves.
template <typename Call>
double time_max_over_ranks(const RankContext& ctx, Call&& call) {
  ctx.comm->barrier();
  const auto start = std::chrono::steady_clock::now();
  call();
  synchronize_device(ctx);
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  return max_over_ranks(ctx, elapsed.count());
}

// Seconds of one `call()` on every rank together: from the earliest rank's
// start, after a barrier that lines the ranks up, to the last rank's end
// (every rank gets the same value; the barrier and the reductions are
// outside the timed region). Not each rank's own duration: where ranks
// outnumber cores, calls that never wait for each other (raw file I/O) would
// run one after another and each still time only its own part, while calls
// that meet in a collective time everyone's. The ranks must share one
// host's monotonic clock (threads, or processes on one machine:
// check_one_host).
template <typename Call>
double time_span_over_ranks(const RankContext& ctx, Call&& call) {
  using Seconds = std::chrono::duration<double>;
  ctx.comm->barrier();
  const Seconds start = std::chrono::steady_clock::now().time_since_epoch();
  call();
  synchronize_device(ctx);
  const Seconds end = std::chrono::steady_clock::now().time_since_epoch();
  return max_over_ranks(ctx, end.count()) + max_over_ranks(ctx, -start.count());
}

// ---------------------------------------------------------------------------
// Raw collectives.

// The tensors and counts of one collective call on one rank.
struct Buffers {
  at::Tensor input;  // also the in-place tensor of all_reduce and broadcast
  at::Tensor output;
  std::vector<int64_t> counts;       // rows per rank; all_to_all_v: rows sent
  std::vector<int64_t> recv_counts;  // all_to_all_v: rows received
};

// One collective. Size convention (collective_bench's `bytes`): `numel` is the
// FULL tensor on one rank: the all_reduce / broadcast tensor, the
// all_gather(_v) output, the reduce_scatter(_v) input, the all_to_all(_v)
// input (= output); it must be a multiple of the group size. The _v variants
// split in proportion 1 : 2 : ... : n (all_to_all_v: rank q sends rank p the
// share of weight ((p - q) mod n) + 1).
struct Collective {
  const char* name;
  Buffers (*prepare)(const Communicator& comm, const at::TensorOptions& options, int64_t numel);
  void (*run)(Communicator&, Buffers&);
  // The same call as a user's code makes it when it needs a new result: into
  // an output it allocates (at::empty: a large one page-faults in on every
  // call), leaving the input as it was; returns that output, so the caller
  // decides when it is freed. Broadcast, in place by nature, runs as `run`
  // and returns its tensor.
  at::Tensor (*run_allocating)(Communicator&, Buffers&);
  // nccl-tests' busbw factor for a group of n: busbw = algbw × factor.
  double (*bus_factor)(int n);
};

// all_reduce, all_gather, all_gather_v, reduce_scatter, reduce_scatter_v,
// all_to_all, all_to_all_v, broadcast: the report order of collective_bench.
const std::vector<Collective>& collectives();
// The collective called `name`; throws if there is none.
const Collective& find_collective(std::string_view name);

// nccl-tests' busbw factors: the fraction of the data that must cross each
// rank's link in a bandwidth-optimal algorithm.
double all_reduce_factor(int n);      // 2(n-1)/n
double gather_scatter_factor(int n);  // (n-1)/n: all_gather, reduce_scatter, all_to_all (+ _v)
double broadcast_factor(int n);       // 1

// Zeros: values do not change the speed, and in-place all_reduce iterations
// stay finite. Filling (rather than at::empty) also touches every page, so no
// page fault lands inside a timed call.
at::Tensor zeros(const at::TensorOptions& options, int64_t numel);

// float32 elements of a `bytes` case, a multiple of n so equal splits exist.
int64_t numel_for(int64_t bytes, int n);

// ---------------------------------------------------------------------------
// Commands: which run every rank executes next.

struct Command {
  static constexpr int64_t kQuit = -1;
  int64_t id = kQuit;  // which case (the program's own numbering), or kQuit
  int64_t bytes = 0;
  int64_t iterations = 0;

  bool operator==(const Command& o) const {
    return id == o.id && bytes == o.bytes && iterations == o.iterations;
  }
  bool operator!=(const Command& o) const { return !(*this == o); }
};

// One rank of a benchmark program. Made on every rank by bench_main, after
// the world exists (the constructor may do collective set-up, e.g. build
// meshes); lives until Google Benchmark is done.
class BenchRank {
 public:
  explicit BenchRank(const RankContext& ctx) : ctx_(ctx) {}
  virtual ~BenchRank() = default;
  BenchRank(const BenchRank&) = delete;
  BenchRank& operator=(const BenchRank&) = delete;

  // Registers the benchmarks (on the ranks that run Google Benchmark); `this`
  // outlives the runs.
  virtual void register_benchmarks() = 0;
  // Local ranks 1..n-1: execute the run rank 0 announced (never kQuit).
  virtual void follow(const Command& command) = 0;
  // "all_gather of 1024 bytes, 3 iterations" (never kQuit), for messages.
  virtual std::string describe(const Command& command) const = 0;

  // On the deciding ranks, before each collective run: rank 0's command goes
  // to the followers; under mpirun all ranks check they agree (a disagreement
  // would otherwise deadlock or pair mismatched collectives, so all ranks
  // fail together). Returns rank 0's command.
  Command announce(const Command& command) const { return share(command); }
  // Local ranks 1..n-1: follow rank 0's commands until it says quit.
  void follow_commands();

  const RankContext& ctx() const { return ctx_; }

 private:
  Command share(std::optional<Command> own) const;
  std::string text(const Command& command) const;

  const RankContext& ctx_;
};

struct BenchProgram {
  const char* name;  // "collective_bench": error messages
  std::function<std::unique_ptr<BenchRank>(const RankContext&)> make_rank;
};

// Parses --backend / --ranks, runs the program's benchmarks on every rank,
// returns main's exit status: 1 when a filter matched nothing (so a smoke test
// whose filter went stale cannot pass silently), on an unknown flag or on an
// error (printed; under mpirun the whole job is aborted).
int bench_main(int argc, char** argv, const BenchProgram& program);

// The steps a redistribute plan chose, for a benchmark's label:
// "d1:all_gather_v + d0,2:all_to_all_v" ("no step" when there is none).
std::string plan_text(const RedistributePlan& plan);

// Per-step tallies of the training-step programs (llama_step_bench,
// fsdp_step_bench): calls or bytes by collective kind.
using Counts = std::map<std::string, int64_t>;
// "1 all_gather_v, 9 all_reduce", or with `as_kib` "all_reduce 18.0" (KiB);
// "none" when empty.
std::string counts_text(const Counts& counts, bool as_kib);
int64_t total(const Counts& counts);

// The --json=FILE output of the training-step programs, which
// benchmarks/make_results.py reads: {"context": {...}, "rows": [{...}, ...]},
// one row a line. A JsonObject collects one object's members in order; the
// keys are the programs' own names (nothing to escape).
class JsonObject {
 public:
  JsonObject& string(const std::string& key, std::string_view value);
  JsonObject& number(const std::string& key, double value);
  JsonObject& integer(const std::string& key, int64_t value);
  JsonObject& boolean(const std::string& key, bool value);
  // {"all_reduce": 9, ...}
  JsonObject& counts(const std::string& key, const Counts& value);
  std::string text() const;  // {"key": value, ...}

 private:
  JsonObject& member(const std::string& key, const std::string& value);
  std::string members_;
};

// Writes the context and the rows to `path`; throws "<program>: --json:
// cannot write <path>" if the file cannot be written.
void write_json(const std::string& path, std::string_view program, const JsonObject& context,
                const std::vector<JsonObject>& rows);

}  // namespace dtensor::bench
