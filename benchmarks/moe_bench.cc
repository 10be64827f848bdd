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
// its outputs (as a layer does). Two raw pairs: one writing into buffers
// made once (the floor), one allocating its outputs as a hand-written layer
// would (fresh multi-MiB buffers page-fault: the gap between the two raw
// pairs is the allocation's cost). Bytes per rank: 16 KiB .. 64 MiB in
// powers of 4.
//
// Timing as redistribute_bench: per run one untimed warm-up of each; each
// iteration times the three pairs, rotating which goes first, each as
// barrier, the two calls, all_reduce(max) of the elapsed seconds. The spmd
// pair's time is Google Benchmark's manual time. Counters:
//   raw_us        mean raw pair time per iteration (max over ranks), µs
//   ratio_to_raw  sum of spmd pair times / sum of raw pair times (the goal
//                 is <= 1.1)
//   ratio_to_raw_allocating  the same against the allocating raw pair
//   busbw_gbps    2 × bytes × (n-1)/n / spmd pair time / 1e9 (nccl-tests'
//                 all_to_all factor, two collectives)
//   bytes, ranks  the tokens' bytes per rank, the world size
// Names: moe_dispatch_combine/<backend>/<n>ranks/<bytes>.
//
// Run (from the build directory; the flags are collective_bench's):
//   benchmarks/moe_bench --backend=local --ranks=4 --benchmark_min_time=0.05
//   mpirun -np 4 --oversubscribe benchmarks/moe_bench --backend=mpi --benchmark_min_time=0.05
#include <array>
#include <functional>
#include <memory>
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

// Seconds of one iteration of each pair.
struct Times {
  double raw = 0;
  double raw_allocating = 0;
  double spmd = 0;
};

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
    run_raw_allocating();
    run_spmd();
    bench::synchronize_device(ctx_);
  }

  // Seconds of each pair in iteration `i`, each the max over ranks; which
  // goes first rotates.
  Times time_one(int64_t i) {
    Times t;
    const std::array<std::function<void()>, 3> timed = {
        [&] { t.raw = bench::time_max_over_ranks(ctx_, [&] { run_raw(); }); },
        [&] { t.raw_allocating = bench::time_max_over_ranks(ctx_, [&] { run_raw_allocating(); }); },
        [&] {
          at::Tensor out;
          t.spmd = bench::time_max_over_ranks(ctx_, [&] { out = run_spmd(); });
        }};
    for (size_t k = 0; k < timed.size(); ++k) timed[(i + k) % timed.size()]();
    return t;
  }

 private:
  void run_raw() {
    ctx_.comm->all_to_all_v(tokens_, send_, raw_dispatched_, recv_);
    ctx_.comm->all_to_all_v(raw_dispatched_, recv_, raw_combined_, send_);
  }

  // As a hand-written layer would: the outputs are new tensors. Every rank
  // receives as many rows as it sends (collective_bench's counts).
  void run_raw_allocating() {
    at::Tensor dispatched = at::empty_like(tokens_);
    ctx_.comm->all_to_all_v(tokens_, send_, dispatched, recv_);
    at::Tensor combined = at::empty_like(tokens_);
    ctx_.comm->all_to_all_v(dispatched, recv_, combined, send_);
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
    Times sum;
    int64_t i = 0;
    for (auto _ : state) {
      const Times t = run.time_one(i++);
      state.SetIterationTime(t.spmd);
      sum.raw += t.raw;
      sum.raw_allocating += t.raw_allocating;
      sum.spmd += t.spmd;
    }
    const double iterations = static_cast<double>(state.iterations());
    const double bus_bytes =
        2.0 * static_cast<double>(bytes) * bench::gather_scatter_factor(bench::size_of(ctx()));
    state.counters["raw_us"] = sum.raw / iterations * 1e6;
    state.counters["ratio_to_raw"] = sum.spmd / sum.raw;
    state.counters["ratio_to_raw_allocating"] = sum.spmd / sum.raw_allocating;
    state.counters["busbw_gbps"] = bus_bytes * iterations / sum.spmd / 1e9;
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
