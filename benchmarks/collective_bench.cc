// Copyright 2026 The dtensor Authors.
//
// benchmarks/collective_bench.cc: the raw collectives of one backend, timed
// exactly; the floor every redistribute is held against.
//
// Measures all_reduce (sum), all_gather, all_gather_v, reduce_scatter (sum),
// reduce_scatter_v, all_to_all, all_to_all_v and broadcast (root 0) on
// float32 tensors of 1 KiB to 256 MiB (powers of 4).
//
// Size convention: the size in a benchmark's name and its `bytes` counter is
// the byte size of the FULL tensor on one rank: the all_reduce / broadcast
// tensor, the all_gather(_v) output, the reduce_scatter(_v) input, the
// all_to_all(_v) input (= output). Per-rank pieces are bytes / ranks; the _v
// variants split the elements in proportion 1 : 2 : ... : ranks (all_to_all_v:
// rank q sends rank p the share of weight ((p - q) mod ranks) + 1, so every
// rank still sends and receives `bytes`). The element count is rounded down
// to a multiple of the rank count; `bytes` reports what was really moved.
//
// Timing: each iteration is barrier, time the one call (plus a device sync on
// nccl), then all_reduce(max) of the elapsed seconds; that max over ranks is
// the iteration's manual time (UseManualTime). One untimed call per run warms
// up buffers and connections. Counters follow nccl-tests (decimal GB/s):
//   algbw_gbps = bytes / time / 1e9
//   busbw_gbps = algbw × 2(n-1)/n   all_reduce
//                algbw × (n-1)/n    all_gather(_v), reduce_scatter(_v), all_to_all(_v)
//                algbw × 1          broadcast
// Names: <collective>/<backend>/<n>ranks/<bytes>, e.g. all_gather/local/4ranks/1048576
// (Google Benchmark appends "/manual_time").
//
// Run (from the build directory; Google Benchmark flags pass through):
//   benchmarks/collective_bench --backend=local --ranks=4 --benchmark_min_time=0.05
//   mpirun -np 4 --oversubscribe benchmarks/collective_bench --backend=mpi --benchmark_min_time=0.05
//   mpirun -np 2 benchmarks/collective_bench --backend=nccl         # CUDA builds only
//   ... --benchmark_filter='^all_gather/.*/1048576/'                  # one case
//   ... --benchmark_filter=-/268435456/                               # all but 256 MiB
// --backend defaults to local, --ranks (local only) to 4.
//
// How ranks run Google Benchmark: on "local" the ranks are threads of one
// run_ranks call that lives for the whole program; rank 0's thread runs
// Google Benchmark and broadcasts each run's (collective, size, iterations) to
// ranks 1..n-1, which execute the same iterations, until rank 0 broadcasts
// "quit". Under mpirun every rank runs Google Benchmark itself: the iteration
// count follows from the manual time, which is the all-reduced max and thus
// identical everywhere, and each run checks that all ranks agree. Only rank 0
// prints.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#if DTENSOR_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

#include "dtensor/base/check.h"
#include "mesh/communicator.h"
#include "mesh/local_communicator.h"
#include "mesh/mpi_communicator.h"

namespace dtensor {
namespace {

// ---------------------------------------------------------------------------
// Ranks.

// What one rank benchmarks with.
struct RankContext {
  std::shared_ptr<Communicator> comm;
  at::TensorOptions options;  // float32 on comm->device()
  // True under mpirun: every rank runs Google Benchmark and decides itself.
  bool every_rank_decides = false;
};

RankContext make_context(std::shared_ptr<Communicator> comm, bool every_rank_decides) {
  at::TensorOptions options = at::TensorOptions().dtype(at::kFloat).device(comm->device());
  return RankContext{std::move(comm), options, every_rank_decides};
}

// Waits for the device work of this process, so the clock covers the whole
// collective and not just its launch. CPU collectives are synchronous.
void synchronize_device(const RankContext& ctx) {
#if DTENSOR_HAVE_NCCL
  if (ctx.options.device().is_cuda()) {
    const cudaError_t status = cudaDeviceSynchronize();
    DTENSOR_CHECK(status == cudaSuccess, "collective_bench: cudaDeviceSynchronize: expected ",
                  "success, found ", cudaGetErrorString(status));
  }
#endif
}

double max_over_ranks(const RankContext& ctx, double value) {
  at::Tensor t = at::full({1}, value, ctx.options.dtype(at::kDouble));
  ctx.comm->all_reduce(t, ReduceOp::kMax);
  return t.item<double>();
}

// ---------------------------------------------------------------------------
// The collectives.

// The tensors and counts of one collective call on one rank.
struct Buffers {
  at::Tensor input;   // also the in-place tensor of all_reduce and broadcast
  at::Tensor output;
  std::vector<int64_t> counts;       // rows per rank; all_to_all_v: rows sent
  std::vector<int64_t> recv_counts;  // all_to_all_v: rows received
};

// `total` split in proportion 1 : 2 : ... : n, summing exactly to `total`.
std::vector<int64_t> uneven_counts(int64_t total, int n) {
  const int64_t weight_sum = int64_t{n} * (n + 1) / 2;
  std::vector<int64_t> counts(n);
  int64_t assigned = 0;
  for (int r = 0; r + 1 < n; ++r) {
    counts[r] = total * (r + 1) / weight_sum;
    assigned += counts[r];
  }
  counts[n - 1] = total - assigned;
  return counts;
}

// Zeros: values do not change the speed, and in-place all_reduce iterations
// stay finite. Filling (rather than at::empty) also touches every page, so no
// page fault lands inside the timed call.
at::Tensor zeros(const RankContext& ctx, int64_t numel) { return at::zeros({numel}, ctx.options); }

int rank_of(const RankContext& ctx) { return ctx.comm->rank(); }
int size_of(const RankContext& ctx) { return ctx.comm->size(); }

Buffers prepare_in_place(const RankContext& ctx, int64_t numel) {
  return Buffers{zeros(ctx, numel), {}, {}, {}};
}
Buffers prepare_gather(const RankContext& ctx, int64_t numel) {
  return Buffers{zeros(ctx, numel / size_of(ctx)), zeros(ctx, numel), {}, {}};
}
Buffers prepare_gather_v(const RankContext& ctx, int64_t numel) {
  std::vector<int64_t> counts = uneven_counts(numel, size_of(ctx));
  return Buffers{zeros(ctx, counts[rank_of(ctx)]), zeros(ctx, numel), counts, {}};
}
Buffers prepare_scatter(const RankContext& ctx, int64_t numel) {
  return Buffers{zeros(ctx, numel), zeros(ctx, numel / size_of(ctx)), {}, {}};
}
Buffers prepare_scatter_v(const RankContext& ctx, int64_t numel) {
  std::vector<int64_t> counts = uneven_counts(numel, size_of(ctx));
  return Buffers{zeros(ctx, numel), zeros(ctx, counts[rank_of(ctx)]), counts, {}};
}
Buffers prepare_all_to_all(const RankContext& ctx, int64_t numel) {
  return Buffers{zeros(ctx, numel), zeros(ctx, numel), {}, {}};
}
// Rank q sends rank p weights[(p - q) mod n] rows: uneven pairs, yet every
// rank sends and receives `numel` in total, as in all_to_all.
Buffers prepare_all_to_all_v(const RankContext& ctx, int64_t numel) {
  const int n = size_of(ctx);
  const int me = rank_of(ctx);
  const std::vector<int64_t> weights = uneven_counts(numel, n);
  std::vector<int64_t> send(n), recv(n);
  for (int p = 0; p < n; ++p) {
    send[p] = weights[(p - me + n) % n];
    recv[p] = weights[(me - p + n) % n];
  }
  return Buffers{zeros(ctx, numel), zeros(ctx, numel), std::move(send), std::move(recv)};
}

void run_all_reduce(Communicator& c, Buffers& b) { c.all_reduce(b.input, ReduceOp::kSum); }
void run_all_gather(Communicator& c, Buffers& b) { c.all_gather(b.input, b.output); }
void run_all_gather_v(Communicator& c, Buffers& b) { c.all_gather_v(b.input, b.output, b.counts); }
void run_reduce_scatter(Communicator& c, Buffers& b) {
  c.reduce_scatter(b.input, b.output, ReduceOp::kSum);
}
void run_reduce_scatter_v(Communicator& c, Buffers& b) {
  c.reduce_scatter_v(b.input, b.output, b.counts, ReduceOp::kSum);
}
void run_all_to_all(Communicator& c, Buffers& b) { c.all_to_all(b.input, b.output); }
void run_all_to_all_v(Communicator& c, Buffers& b) {
  c.all_to_all_v(b.input, b.counts, b.output, b.recv_counts);
}
void run_broadcast(Communicator& c, Buffers& b) { c.broadcast(b.input, /*root=*/0); }

// nccl-tests' busbw factors: the fraction of the data that must cross each
// rank's link in a bandwidth-optimal algorithm.
double all_reduce_factor(int n) { return 2.0 * (n - 1) / n; }
double gather_scatter_factor(int n) { return static_cast<double>(n - 1) / n; }
double broadcast_factor(int) { return 1.0; }

struct Collective {
  const char* name;
  Buffers (*prepare)(const RankContext&, int64_t numel);
  void (*run)(Communicator&, Buffers&);
  double (*bus_factor)(int n);
};

// Indexed by the collective field of a Command; the order is the report order.
constexpr Collective kCollectives[] = {
    {"all_reduce", prepare_in_place, run_all_reduce, all_reduce_factor},
    {"all_gather", prepare_gather, run_all_gather, gather_scatter_factor},
    {"all_gather_v", prepare_gather_v, run_all_gather_v, gather_scatter_factor},
    {"reduce_scatter", prepare_scatter, run_reduce_scatter, gather_scatter_factor},
    {"reduce_scatter_v", prepare_scatter_v, run_reduce_scatter_v, gather_scatter_factor},
    {"all_to_all", prepare_all_to_all, run_all_to_all, gather_scatter_factor},
    {"all_to_all_v", prepare_all_to_all_v, run_all_to_all_v, gather_scatter_factor},
    {"broadcast", prepare_in_place, run_broadcast, broadcast_factor},
};
constexpr int kNumCollectives = sizeof(kCollectives) / sizeof(kCollectives[0]);

constexpr int64_t kMinBytes = int64_t{1} << 10;   // 1 KiB
constexpr int64_t kMaxBytes = int64_t{1} << 28;   // 256 MiB
constexpr int64_t kBytesStep = 4;

// float32 elements of a `bytes` case, a multiple of n so equal splits exist.
int64_t numel_for(int64_t bytes, int n) {
  return bytes / static_cast<int64_t>(sizeof(float)) / n * n;
}

// One benchmark run of a collective on one rank: buffers made and warmed up
// by the constructor, then `time_one` per iteration.
class CollectiveRun {
 public:
  CollectiveRun(const RankContext& ctx, const Collective& collective, int64_t bytes)
      : ctx_(ctx),
        collective_(collective),
        buffers_(collective.prepare(ctx, numel_for(bytes, size_of(ctx)))) {
    collective_.run(*ctx_.comm, buffers_);  // untimed warm-up
    synchronize_device(ctx_);
  }

  // Seconds of one call, the max over ranks (every rank gets the same value).
  double time_one() {
    // The barrier lines ranks up so the clock measures the collective, not
    // the skew left by the previous iteration's max reduction.
    ctx_.comm->barrier();
    const auto start = std::chrono::steady_clock::now();
    collective_.run(*ctx_.comm, buffers_);
    synchronize_device(ctx_);
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    return max_over_ranks(ctx_, elapsed.count());
  }

 private:
  const RankContext& ctx_;
  const Collective& collective_;
  Buffers buffers_;
};

// ---------------------------------------------------------------------------
// Commands: which run every rank executes next.

struct Command {
  static constexpr int64_t kQuit = -1;
  int64_t collective = kQuit;  // index into kCollectives, or kQuit
  int64_t bytes = 0;
  int64_t iterations = 0;

  bool operator==(const Command& o) const {
    return collective == o.collective && bytes == o.bytes && iterations == o.iterations;
  }
  bool operator!=(const Command& o) const { return !(*this == o); }
};

std::ostream& operator<<(std::ostream& os, const Command& c) {
  if (c.collective == Command::kQuit) return os << "quit";
  return os << kCollectives[c.collective].name << " of " << c.bytes << " bytes, " << c.iterations
            << " iterations";
}

// Returns rank 0's command on every rank. `own` is what this rank decided
// itself (nullopt on the local backend's ranks 1..n-1, which only follow).
// When every rank decides, they must agree: a disagreement would otherwise
// deadlock or pair mismatched collectives, so all ranks fail together.
Command share_command(const RankContext& ctx, std::optional<Command> own) {
  const Command mine = own.value_or(Command{});
  at::Tensor wire = at::tensor({mine.collective, mine.bytes, mine.iterations}, at::kLong)
                        .to(ctx.options.device());
  ctx.comm->broadcast(wire, /*root=*/0);
  wire = wire.cpu();
  const Command root{wire[0].item<int64_t>(), wire[1].item<int64_t>(), wire[2].item<int64_t>()};
  if (ctx.every_rank_decides) {
    at::Tensor disagree = at::full({1}, root != mine ? 1 : 0, ctx.options.dtype(at::kLong));
    ctx.comm->all_reduce(disagree, ReduceOp::kMax);
    DTENSOR_CHECK(disagree.item<int64_t>() == 0, "collective_bench: ranks disagree on the next ",
                  "run: rank 0 decided ", root, "; this rank (", rank_of(ctx), ") decided ", mine);
  }
  return root;
}

// Local ranks 1..n-1: execute rank 0's runs until it says quit.
void follow_commands(const RankContext& ctx) {
  for (;;) {
    const Command command = share_command(ctx, std::nullopt);
    if (command.collective == Command::kQuit) return;
    CollectiveRun run(ctx, kCollectives[command.collective], command.bytes);
    for (int64_t i = 0; i < command.iterations; ++i) run.time_one();
  }
}

// ---------------------------------------------------------------------------
// Google Benchmark.

void bench_collective(benchmark::State& state, const RankContext& ctx, int collective,
                      int64_t bytes) {
  share_command(ctx, Command{collective, bytes, static_cast<int64_t>(state.max_iterations)});
  CollectiveRun run(ctx, kCollectives[collective], bytes);
  double total_seconds = 0;
  for (auto _ : state) {
    const double seconds = run.time_one();
    state.SetIterationTime(seconds);
    total_seconds += seconds;
  }
  const int n = size_of(ctx);
  const double moved = static_cast<double>(numel_for(bytes, n) * sizeof(float));
  const double algbw = moved * static_cast<double>(state.iterations()) / total_seconds / 1e9;
  state.counters["algbw_gbps"] = algbw;
  state.counters["busbw_gbps"] = algbw * kCollectives[collective].bus_factor(n);
  state.counters["bytes"] = benchmark::Counter(moved, benchmark::Counter::kDefaults,
                                               benchmark::Counter::OneK::kIs1024);
  state.counters["ranks"] = n;
}

// Registers every collective × size; `ctx` must outlive RunSpecifiedBenchmarks.
void register_benchmarks(const RankContext& ctx) {
  const std::string suffix = "/" + std::string(ctx.comm->backend_name()) + "/" +
                             std::to_string(size_of(ctx)) + "ranks/";
  for (int c = 0; c < kNumCollectives; ++c) {
    for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= kBytesStep) {
      const std::string name = kCollectives[c].name + suffix + std::to_string(bytes);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [&ctx, c, bytes](benchmark::State& state) {
                                     bench_collective(state, ctx, c, bytes);
                                   })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// Prints nothing: ranks other than 0 under mpirun run the same benchmarks
// but must stay silent. Its stream swallows --benchmark_list_tests too.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  SilentReporter() {
    SetOutputStream(&sink_);
    SetErrorStream(&sink_);
  }
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}

 private:
  std::ostream sink_{nullptr};  // no buffer: every write is dropped
};

// ---------------------------------------------------------------------------
// Command line.

struct Options {
  std::string backend = "local";
  int ranks = 4;  // local only; mpirun decides for the others
};

// Removes argv[i] for which `take` returns true, keeping argv[argc] == nullptr.
template <typename Take>
void remove_args(int& argc, char** argv, Take take) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (!take(std::string_view(argv[i]))) argv[kept++] = argv[i];
  }
  argc = kept;
  argv[argc] = nullptr;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Parses and strips our flags so Google Benchmark sees only its own.
Options take_options(int& argc, char** argv) {
  Options options;
  remove_args(argc, argv, [&](std::string_view arg) {
    if (starts_with(arg, "--backend=")) {
      options.backend = std::string(arg.substr(std::strlen("--backend=")));
      return true;
    }
    if (starts_with(arg, "--ranks=")) {
      const std::string value(arg.substr(std::strlen("--ranks=")));
      char* end = nullptr;
      const long ranks = std::strtol(value.c_str(), &end, 10);
      DTENSOR_CHECK(!value.empty() && *end == '\0' && ranks >= 1 && ranks <= 1024,
                    "collective_bench: --ranks: expected a whole number in [1, 1024], found \"",
                    value, "\"");
      options.ranks = static_cast<int>(ranks);
      return true;
    }
    return false;
  });
  return options;
}

// Initializes Google Benchmark; false when argv holds flags nobody knows.
bool initialize_benchmark(int& argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  return !benchmark::ReportUnrecognizedArguments(argc, argv);
}

// ---------------------------------------------------------------------------
// Drivers.

// A filter that matches nothing fails the run (Google Benchmark only prints
// a message), so a smoke test whose filter went stale cannot pass silently.
int exit_status(size_t benchmarks_matched) { return benchmarks_matched == 0 ? 1 : 0; }

int run_local(const Options& options, int argc, char** argv) {
  if (!initialize_benchmark(argc, argv)) return 1;
  size_t matched = 0;
  run_ranks(options.ranks, [&matched](int rank) {
    const RankContext ctx = make_context(local_world(), /*every_rank_decides=*/false);
    if (rank != 0) return follow_commands(ctx);
    register_benchmarks(ctx);
    matched = benchmark::RunSpecifiedBenchmarks();
    share_command(ctx, Command{});  // quit: releases ranks 1..n-1
  });
  return exit_status(matched);
}

// mpi and nccl: one process per rank, all running Google Benchmark.
int run_spmd(const Options& options, int argc, char** argv) {
  const RankContext ctx = make_context(make_world_communicator(options.backend),
                                       /*every_rank_decides=*/true);
  const bool prints = rank_of(ctx) == 0;
  // Only rank 0 writes --benchmark_out; Google Benchmark would open the file
  // on every rank otherwise.
  if (!prints) {
    remove_args(argc, argv, [](std::string_view arg) { return starts_with(arg, "--benchmark_out"); });
  }
  if (!initialize_benchmark(argc, argv)) return 1;
  register_benchmarks(ctx);
  size_t matched = 0;
  if (prints) {
    matched = benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    matched = benchmark::RunSpecifiedBenchmarks(&silent);
  }
  // Every rank leaves the last collective before any tears MPI down.
  ctx.comm->barrier();
  return exit_status(matched);
}

int run_main(int argc, char** argv) {
  const Options options = take_options(argc, argv);
  const int status = options.backend == "local" ? run_local(options, argc, argv)
                                                : run_spmd(options, argc, argv);
  benchmark::Shutdown();
  return status;
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  try {
    return dtensor::run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collective_bench: %s\n", e.what());
    // Under mpirun a rank that fails alone would leave the others waiting in
    // a collective: take the whole job down.
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}
