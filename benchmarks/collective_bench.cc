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
//   mpirun -np 4 --oversubscribe benchmarks/collective_bench --backend=mpi
//   --benchmark_min_time=0.05 mpirun -np 2 benchmarks/collective_bench --backend=nccl         #
//   CUDA builds only
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
// prints. That machinery, the timing and the raw collectives live in
// bench_support.{h,cc}, shared with redistribute_bench.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <dtensor/mesh/communicator.h>
#include "benchmarks/bench_support.h"

namespace dtensor {
namespace {

using bench::BenchRank;
using bench::Buffers;
using bench::Collective;
using bench::Command;
using bench::numel_for;
using bench::RankContext;
using bench::size_of;

constexpr int64_t kMinBytes = int64_t{1} << 10;  // 1 KiB
constexpr int64_t kMaxBytes = int64_t{1} << 28;  // 256 MiB
constexpr int64_t kBytesStep = 4;

// One benchmark run of a collective on one rank: buffers made and warmed up
// by the constructor, then `time_one` per iteration.
class CollectiveRun {
 public:
  CollectiveRun(const RankContext& ctx, const Collective& collective, int64_t bytes)
      : ctx_(ctx),
        collective_(collective),
        buffers_(collective.prepare(*ctx.comm, ctx.options, numel_for(bytes, size_of(ctx)))) {
    collective_.run(*ctx_.comm, buffers_);  // untimed warm-up
    bench::synchronize_device(ctx_);
  }

  // Seconds of one call, the max over ranks (every rank gets the same value).
  double time_one() {
    return bench::time_max_over_ranks(ctx_, [&] { collective_.run(*ctx_.comm, buffers_); });
  }

 private:
  const RankContext& ctx_;
  const Collective& collective_;
  Buffers buffers_;
};

// Command ids index bench::collectives(); that order is the report order.
class CollectiveBenchRank final : public BenchRank {
 public:
  using BenchRank::BenchRank;

  // Registers every collective × size.
  void register_benchmarks() override {
    const std::string suffix = "/" + std::string(ctx().comm->backend_name()) + "/" +
                               std::to_string(size_of(ctx())) + "ranks/";
    const int count = static_cast<int>(bench::collectives().size());
    for (int c = 0; c < count; ++c) {
      for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= kBytesStep) {
        const std::string name = bench::collectives()[c].name + suffix + std::to_string(bytes);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [this, c, bytes](benchmark::State& state) { run_benchmark(state, c, bytes); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }

  void follow(const Command& command) override {
    CollectiveRun run(ctx(), bench::collectives()[command.id], command.bytes);
    for (int64_t i = 0; i < command.iterations; ++i) run.time_one();
  }

  std::string describe(const Command& c) const override {
    return std::string(bench::collectives()[c.id].name) + " of " + std::to_string(c.bytes) +
           " bytes, " + std::to_string(c.iterations) + " iterations";
  }

 private:
  void run_benchmark(benchmark::State& state, int collective, int64_t bytes) {
    announce(Command{collective, bytes, static_cast<int64_t>(state.max_iterations)});
    const Collective& raw = bench::collectives()[collective];
    CollectiveRun run(ctx(), raw, bytes);
    double total_seconds = 0;
    for (auto _ : state) {
      const double seconds = run.time_one();
      state.SetIterationTime(seconds);
      total_seconds += seconds;
    }
    const int n = size_of(ctx());
    const double moved = static_cast<double>(numel_for(bytes, n) * sizeof(float));
    const double algbw = moved * static_cast<double>(state.iterations()) / total_seconds / 1e9;
    state.counters["algbw_gbps"] = algbw;
    state.counters["busbw_gbps"] = algbw * raw.bus_factor(n);
    state.counters["bytes"] =
        benchmark::Counter(moved, benchmark::Counter::kDefaults, benchmark::Counter::OneK::kIs1024);
    state.counters["ranks"] = n;
  }
};

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  return dtensor::bench::bench_main(
      argc, argv, {"collective_bench", [](const dtensor::bench::RankContext& ctx) {
                     return std::make_unique<dtensor::CollectiveBenchRank>(ctx);
                   }});
}
