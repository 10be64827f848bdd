// Copyright 2026 The dtensor Authors.
//
// benchmarks/scaling_bench.cc: how DTensor::redistribute's time scales with the
// rank count and the mesh's shape (issue 19): a few representative transitions
// on every mesh shape of the world, each timed against the raw collective(s) it
// rests on in the same run. make_results.sh runs it for 2, 4 and 8 ranks.
//
// Meshes (all over the world's ranks, row-major): (n); (n/2, 2) when n is even
// and at least 4; (2, 2, n/4) when n is a multiple of 4 and at least 8. So 2
// ranks: (2); 4 ranks: (4), (2,2); 8 ranks: (8), (4,2), (2,2,2).
//
// Cases, on a mesh of k dims (placements as the parser spells them):
//   S0_to_R    [S(0) x k] -> [R x k]        raw: all_gather of the global bytes on the world
//   P_to_R     [P(sum) x k] -> [R x k]      raw: all_reduce of the global bytes on the world
//   S0_to_S1   [S(0) x k] -> [S(1) x k]     raw: all_to_all of the local shard (global / n)
//                                           on the world
//   S0S1_to_R  [S(0),S(1),R..] -> [R x k]   (k >= 2) raw: all_gather of global / size(0) on
//                                           mesh dim 1, then of the global bytes on mesh dim 0
// Shard(0) on every dim lays the rows out in world rank order (the mesh is row-major), so on
// any mesh the first three are the 1-D transition over the flattened mesh, and one collective
// over the world is their floor, whatever the plan; S0S1_to_R's floor is
// redistribute_bench's two-step gather. The label names the transition and the raw steps.
//
// Tensors: float32 [bytes / 1024, 256] (S(1) splits the 256 columns), bytes = 1 MiB and
// 16 MiB: the GLOBAL tensor's bytes (each rank holds 1/n of it when sharded). Values are
// zeros. A Partial source is redistribute_any(distribute_tensor(zeros, mesh, R..), P(sum)..).
//
// Timing, as redistribute_bench's "raw" (the floor: raw buffers made and zero-filled before
// the run; the redistribute allocates its output in the timed call): per run the input is
// distributed once, one untimed warm-up of each, then per iteration the raw step(s) and the
// redistribute, alternating which goes first, each the max over ranks. The redistribute's time
// is Google Benchmark's manual time. Counters:
//   raw_us        mean raw time per iteration, µs
//   ratio_to_raw  sum of redistribute times / sum of raw times
//   steps         the steps of the plan the planner chose
//   bytes, ranks, mesh_ndim
// Names: scaling/<case>/<mesh>/<backend>/<n>ranks/<bytes>, e.g.
// scaling/S0S1_to_R/4x2/local/8ranks/1048576 (Google Benchmark appends "/manual_time").
//
//   benchmarks/scaling_bench --backend=local --ranks=8 --benchmark_min_time=0.1
//   mpirun -np 8 --oversubscribe benchmarks/scaling_bench --backend=mpi
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/planner.h>
#include "benchmarks/bench_support.h"

namespace dtensor {
namespace {

using bench::BenchRank;
using bench::Buffers;
using bench::Command;
using bench::RankContext;
using bench::size_of;

constexpr std::array<int64_t, 2> kBytes = {int64_t{1} << 20, int64_t{16} << 20};
constexpr int64_t kColumns = 256;
constexpr int64_t kRowBytes = kColumns * static_cast<int64_t>(sizeof(float));

// ---------------------------------------------------------------------------
// Meshes and cases.

std::vector<std::vector<int64_t>> mesh_shapes(int n) {
  std::vector<std::vector<int64_t>> shapes = {{n}};
  if (n % 2 == 0 && n >= 4) shapes.push_back({n / 2, 2});
  if (n % 4 == 0 && n >= 8) shapes.push_back({2, 2, n / 4});
  return shapes;
}

// "4x2".
std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t size : shape) text += (text.empty() ? "" : "x") + std::to_string(size);
  return text;
}

// A raw step's size (collective_bench's convention) as a share of the global bytes.
enum class Share { kGlobal, kPerRank, kOverDim0 /* global / mesh.size(0) */ };

struct RawStep {
  const char* collective;  // a bench::collectives() name
  int mesh_dim;            // kWorld: the world (the flattened mesh)
  Share share;
  static constexpr int kWorld = -1;
};

struct Case {
  std::string name;
  std::string source;  // placements for the mesh's dims
  std::string target;
  std::vector<RawStep> raw;
};

// `first`, then k - 1 times `rest`: (3, "S(0)", "R") -> "S(0),R,R".
std::string placements_text(int k, const std::string& first, const std::string& rest) {
  std::string text = first;
  for (int d = 1; d < k; ++d) text += "," + rest;
  return text;
}

// The cases of a k-dim mesh; the order is the report order.
std::vector<Case> make_cases(int k) {
  const auto all = [k](const std::string& p) { return placements_text(k, p, p); };
  std::vector<Case> cases = {
      {"S0_to_R", all("S(0)"), all("R"), {{"all_gather", RawStep::kWorld, Share::kGlobal}}},
      {"P_to_R", all("P(sum)"), all("R"), {{"all_reduce", RawStep::kWorld, Share::kGlobal}}},
      {"S0_to_S1", all("S(0)"), all("S(1)"), {{"all_to_all", RawStep::kWorld, Share::kPerRank}}},
  };
  if (k >= 2) {
    cases.push_back({"S0S1_to_R",
                     placements_text(k - 1, "S(0),S(1)", "R"),
                     all("R"),
                     {{"all_gather", 1, Share::kOverDim0}, {"all_gather", 0, Share::kGlobal}}});
  }
  return cases;
}

// "d1:all_gather + d0:all_gather" ("world:" for the flattened mesh).
std::string raw_text(const Case& c) {
  std::string text;
  for (const RawStep& step : c.raw) {
    if (!text.empty()) text += " + ";
    text += step.mesh_dim == RawStep::kWorld ? "world" : "d" + std::to_string(step.mesh_dim);
    text += std::string(":") + step.collective;
  }
  return text;
}

// One registered benchmark: a case on one mesh at one size.
struct Entry {
  int mesh;  // index into the meshes
  Case c;
  int64_t bytes;
};

// ---------------------------------------------------------------------------
// One benchmark run of an entry on one rank.

class CaseRun {
 public:
  CaseRun(const RankContext& ctx, const DeviceMesh& mesh, const Case& c, int64_t bytes)
      : ctx_(ctx) {
    const at::Tensor global = at::zeros({bytes / kRowBytes, kColumns}, ctx.options);
    const std::vector<PlacementPtr> source = parse_placements(c.source);
    if (c.source.rfind("P(", 0) == 0) {
      // The public redistribute refuses Partial targets: replicate, then mark Partial.
      const std::string replicated = placements_text(static_cast<int>(mesh.ndim()), "R", "R");
      source_.emplace(
          redistribute_any(distribute_tensor(global, mesh, parse_placements(replicated)), source));
    } else {
      source_.emplace(distribute_tensor(global, mesh, source));
    }
    target_ = parse_placements(c.target);
    steps_ = static_cast<int64_t>(plan_redistribute(source_->spec(), target_)->steps.size());
    for (const RawStep& step : c.raw) raws_.push_back(make_raw(mesh, step, bytes));
    run_raw();  // untimed warm-ups
    run_redistribute();
    bench::synchronize_device(ctx_);
  }

  // Seconds of the raw step(s) and of the redistribute in iteration `i`, each
  // the max over ranks; which goes first alternates, so neither always runs
  // on caches the other warmed.
  std::pair<double, double> time_one(int64_t i) {
    double raw = 0, ours = 0;
    const std::array<std::function<void()>, 2> timed = {
        [&] { raw = bench::time_max_over_ranks(ctx_, [&] { run_raw(); }); },
        [&] {
          std::optional<DTensor> out;  // freed after the clock stopped
          ours = bench::time_max_over_ranks(ctx_, [&] { out.emplace(run_redistribute()); });
        }};
    for (size_t k = 0; k < timed.size(); ++k) timed[(i + k) % timed.size()]();
    return {raw, ours};
  }

  int64_t steps() const { return steps_; }

 private:
  struct Raw {
    std::shared_ptr<Communicator> comm;
    const bench::Collective* collective;
    Buffers buffers;
  };

  Raw make_raw(const DeviceMesh& mesh, const RawStep& step, int64_t bytes) const {
    int64_t size = bytes;
    if (step.share == Share::kPerRank) size = bytes / size_of(ctx_);
    if (step.share == Share::kOverDim0) size = bytes / mesh.size(0);
    Raw raw{step.mesh_dim == RawStep::kWorld ? ctx_.comm : mesh.communicator(step.mesh_dim),
            &bench::find_collective(step.collective),
            {}};
    raw.buffers =
        raw.collective->prepare(*raw.comm, ctx_.options, bench::numel_for(size, raw.comm->size()));
    return raw;
  }

  void run_raw() {
    for (Raw& raw : raws_) raw.collective->run(*raw.comm, raw.buffers);
  }

  DTensor run_redistribute() const { return source_->redistribute(target_); }

  const RankContext& ctx_;
  std::optional<DTensor> source_;
  std::vector<PlacementPtr> target_;
  int64_t steps_ = 0;
  std::vector<Raw> raws_;
};

// ---------------------------------------------------------------------------
// Google Benchmark.

// Command ids index the entries.
class ScalingBenchRank final : public BenchRank {
 public:
  explicit ScalingBenchRank(const RankContext& ctx) : BenchRank(ctx) {
    for (const std::vector<int64_t>& shape : mesh_shapes(size_of(ctx))) {
      meshes_.emplace_back(ctx.comm, shape);  // collective over the world
      for (const Case& c : make_cases(static_cast<int>(shape.size()))) {
        for (int64_t bytes : kBytes) {
          entries_.push_back({static_cast<int>(meshes_.size()) - 1, c, bytes});
        }
      }
    }
  }

  void register_benchmarks() override {
    const std::string suffix = "/" + std::string(ctx().comm->backend_name()) + "/" +
                               std::to_string(size_of(ctx())) + "ranks/";
    for (int e = 0; e < static_cast<int>(entries_.size()); ++e) {
      const Entry& entry = entries_[e];
      const std::string name = "scaling/" + entry.c.name + "/" +
                               shape_text(meshes_[entry.mesh].shape()) + suffix +
                               std::to_string(entry.bytes);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [this, e](benchmark::State& state) { run_entry(state, e); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }

  void follow(const Command& command) override {
    CaseRun run = make_run(entries_[command.id]);
    for (int64_t i = 0; i < command.iterations; ++i) run.time_one(i);
  }

  std::string describe(const Command& command) const override {
    const Entry& entry = entries_[command.id];
    return entry.c.name + " on mesh " + shape_text(meshes_[entry.mesh].shape()) + " of " +
           std::to_string(entry.bytes) + " bytes, " + std::to_string(command.iterations) +
           " iterations";
  }

 private:
  CaseRun make_run(const Entry& entry) const {
    return CaseRun(ctx(), meshes_[entry.mesh], entry.c, entry.bytes);
  }

  void run_entry(benchmark::State& state, int e) {
    const Entry& entry = entries_[e];
    announce(Command{e, entry.bytes, static_cast<int64_t>(state.max_iterations)});
    CaseRun run = make_run(entry);
    double raw = 0, ours = 0;
    int64_t i = 0;
    for (auto _ : state) {
      const auto [raw_seconds, ours_seconds] = run.time_one(i++);
      state.SetIterationTime(ours_seconds);
      raw += raw_seconds;
      ours += ours_seconds;
    }
    state.counters["raw_us"] = raw / static_cast<double>(state.iterations()) * 1e6;
    state.counters["ratio_to_raw"] = ours / raw;
    state.counters["steps"] = static_cast<double>(run.steps());
    state.counters["bytes"] =
        benchmark::Counter(static_cast<double>(entry.bytes), benchmark::Counter::kDefaults,
                           benchmark::Counter::OneK::kIs1024);
    state.counters["ranks"] = size_of(ctx());
    state.counters["mesh_ndim"] = static_cast<double>(meshes_[entry.mesh].ndim());
    state.SetLabel(entry.c.source + " -> " + entry.c.target + " raw [" + raw_text(entry.c) + "]");
  }

  std::vector<DeviceMesh> meshes_;
  std::vector<Entry> entries_;
};

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  return dtensor::bench::bench_main(argc, argv,
                                    {"scaling_bench", [](const dtensor::bench::RankContext& ctx) {
                                       return std::make_unique<dtensor::ScalingBenchRank>(ctx);
                                     }});
}
