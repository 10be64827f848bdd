// Copyright 2026 The dtensor Authors.
//
// benchmarks/moe_bench.cc: the dispatch and combine of an expert-parallel MoE
// layer (examples/moe) through the typed spmd::all_to_all_v, timed against
// the hand-written pair of Communicator::all_to_all_v calls it is made of,
// both measured in the same benchmark run.
//
// Each rank holds `bytes` of tokens: float32 rows of 256 columns (1 KiB).
// Dispatch sends rank p the rows of weight ((p - q) mod n) + 1 out of
// 1 + 2 + ... + n (collective_bench's all_to_all_v counts, uneven per pair);
// combine sends them back with the counts swapped. The spmd pair allocates
// its outputs (as a layer does); the raw pair writes into buffers made once
// (the floor). Bytes per rank: 16 KiB .. 64 MiB in powers of 4.
//
// Timing as redistribute_bench: per run one untimed warm-up of each; each
// iteration times both pairs, alternating which goes first, each as barrier,
// the two calls, all_reduce(max) of the elapsed seconds. The spmd pair's time
// is Google Benchmark's manual time. Counters:
//   raw_us        mean raw pair time per iteration (max over ranks), µs
//   ratio_to_raw  sum of spmd pair times / sum of raw pair times (the goal
//                 is <= 1.1)
//   busbw_gbps    2 × bytes × (n-1)/n / spmd pair time / 1e9 (nccl-tests'
//                 all_to_all factor, two collectives)
//   bytes, ranks  the tokens' bytes per rank, the world size
// Names: moe_dispatch_combine/<backend>/<n>ranks/<bytes>.
//
// Run (from the build directory; the flags are collective_bench's):
//   benchmarks/moe_bench --backend=local --ranks=4 --benchmark_min_time=0.05
//   mpirun -np 4 --oversubscribe benchmarks/moe_bench --backend=mpi --benchmark_min_time=0.05
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <benchmark/benchmark.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/spmd/collectives.h>
#include "benchmarks/bench_support.h"

namespace dtensor {
namespace {

using bench::BenchRank;
using bench::Buffers;
using bench::Command;
using bench::RankContext;

constexpr int64_t kColumns = 256;
constexpr int64_t kRowBytes = kColumns * static_cast<int64_t>(sizeof(float));
constexpr int64_t kMinBytes = int64_t{16} << 10;
constexpr int64_t kMaxBytes = int64_t{64} << 20;
constexpr int64_t kBytesStep = 4;

// One benchmark run of `bytes` per rank on one rank.
class DispatchCombineRun {
 public:
  DispatchCombineRun(const RankContext& ctx, const DeviceMesh& mesh, int64_t bytes)
      : ctx_(ctx), mesh_(mesh) {
    const int64_t rows = bytes / kRowBytes;
    // Row counts only: the 1-D buffers it makes are left unused.
    const Buffers counts =
        bench::find_collective("all_to_all_v").prepare(*ctx.comm, ctx.options, rows);
    send_ = counts.counts;
    recv_ = counts.recv_counts;
    tokens_ = at::zeros({rows, kColumns}, ctx.options);
    raw_dispatched_ = at::zeros({rows, kColumns}, ctx.options);
    raw_combined_ = at::zeros({rows, kColumns}, ctx.options);
    run_raw();  // untimed warm-ups
    run_spmd();
    bench::synchronize_device(ctx_);
  }

  // Seconds of the raw pair and of the spmd pair in iteration `i`, each the
  // max over ranks.
  std::pair<double, double> time_one(int64_t i) {
    double raw = 0;
    double spmd = 0;
    const auto time_raw = [&] { raw = bench::time_max_over_ranks(ctx_, [&] { run_raw(); }); };
    const auto time_spmd = [&] {
      at::Tensor out;
      spmd = bench::time_max_over_ranks(ctx_, [&] { out = run_spmd(); });
    };
    if (i % 2 == 0) {
      time_raw();
      time_spmd();
    } else {
      time_spmd();
      time_raw();
    }
    return {raw, spmd};
  }

 private:
  void run_raw() {
    ctx_.comm->all_to_all_v(tokens_, send_, raw_dispatched_, recv_);
    ctx_.comm->all_to_all_v(raw_dispatched_, recv_, raw_combined_, send_);
  }

  at::Tensor run_spmd() const {
    const at::Tensor dispatched = spmd::all_to_all_v(tokens_, mesh_, "ep", send_, recv_);
    return spmd::all_to_all_v(dispatched, mesh_, "ep", recv_, send_);
  }

  const RankContext& ctx_;
  const DeviceMesh& mesh_;
  std::vector<int64_t> send_, recv_;
  at::Tensor tokens_, raw_dispatched_, raw_combined_;
};

// Command ids: 0, the only case; the size varies.
class MoeBenchRank final : public BenchRank {
 public:
  explicit MoeBenchRank(const RankContext& ctx)
      : BenchRank(ctx), mesh_(ctx.comm, {bench::size_of(ctx)}, {"ep"}) {}

  void register_benchmarks() override {
    const std::string prefix = "moe_dispatch_combine/" + std::string(ctx().comm->backend_name()) +
                               "/" + std::to_string(bench::size_of(ctx())) + "ranks/";
    for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= kBytesStep) {
      benchmark::RegisterBenchmark((prefix + std::to_string(bytes)).c_str(),
                                   [this, bytes](benchmark::State& state) { run(state, bytes); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }

  void follow(const Command& command) override {
    DispatchCombineRun run(ctx(), mesh_, command.bytes);
    for (int64_t i = 0; i < command.iterations; ++i) run.time_one(i);
  }

  std::string describe(const Command& c) const override {
    return "dispatch and combine of " + std::to_string(c.bytes) + " bytes, " +
           std::to_string(c.iterations) + " iterations";
  }

 private:
  void run(benchmark::State& state, int64_t bytes) {
    announce(Command{0, bytes, static_cast<int64_t>(state.max_iterations)});
    DispatchCombineRun run(ctx(), mesh_, bytes);
    double raw_seconds = 0;
    double spmd_seconds = 0;
    int64_t i = 0;
    for (auto _ : state) {
      const auto [raw, spmd] = run.time_one(i++);
      state.SetIterationTime(spmd);
      raw_seconds += raw;
      spmd_seconds += spmd;
    }
    const double iterations = static_cast<double>(state.iterations());
    const double bus_bytes =
        2.0 * static_cast<double>(bytes) * bench::gather_scatter_factor(bench::size_of(ctx()));
    state.counters["raw_us"] = raw_seconds / iterations * 1e6;
    state.counters["ratio_to_raw"] = spmd_seconds / raw_seconds;
    state.counters["busbw_gbps"] = bus_bytes * iterations / spmd_seconds / 1e9;
    state.counters["bytes"] =
        benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kDefaults,
                           benchmark::Counter::OneK::kIs1024);
    state.counters["ranks"] = bench::size_of(ctx());
  }

  DeviceMesh mesh_;
};

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  return dtensor::bench::bench_main(argc, argv,
                                    {"moe_bench", [](const dtensor::bench::RankContext& ctx) {
                                       return std::make_unique<dtensor::MoeBenchRank>(ctx);
                                     }});
}
