// Copyright 2026 The dtensor Authors.
//
// benchmarks/redistribute_bench.cc: DTensor::redistribute per transition,
// timed against the raw collective the transition is made of, both measured
// in the same benchmark run; and the cost of a plan-cache hit.
//
// Cases (the name's first part; placements as the parser spells them):
//   1-D mesh (n):
//     S0_to_R    S(0) -> R        raw: all_gather of the global bytes
//     S1_to_R    S(1) -> R        raw: all_gather of the global bytes
//     P_to_R     P(sum) -> R      raw: all_reduce of the global bytes
//     P_to_S0    P(sum) -> S(0)   raw: reduce_scatter of the global bytes
//     S0_to_S1   S(0) -> S(1)     raw: all_to_all of the local shard (global / n)
//     S0_to_S1_wide, S1_to_S0_wide  S(0) -> S(1) and back of [rows, 1024] (column blocks of
//                                 rows of 1 KiB on 4 ranks, as a hidden dim of a model
//                                 splits, where S0_to_S1's are 256 bytes)
//                                 raw: all_to_all of the local shard (global / n)
//     R_to_S0    R -> S(0)        raw: none exists (a local slice): a memcpy of the local
//                                 shard (global / n bytes); busbw is 0 (nothing crosses a link)
//     P_to_R_given   std::move(x).redistribute(R) of P(sum): the source given up, so the
//                    sum is reduced in its memory (raw: all_reduce of the global bytes)
//     R_to_S0_given  std::move(x).redistribute(S(0)) of R: the shard is a view of the source
//                    (raw: the memcpy of R_to_S0)
//                    Each call of a *_given case gets a source only it holds, made
//                    before the clock starts on the memory the previous call left
//                    (no copy per iteration; checked to be reused). R_to_S0_given
//                    runs 200 iterations at every size (its call is microseconds,
//                    its raw memcpy milliseconds at the large sizes).
//     RG_to_RG   RG(dims=1,units=[1,2,..,n]) -> RG(dims=1,units=[n,..,2,1])
//                                 raw: all_to_all_v with the same counts (the overlaps of the
//                                 two row partitions, the rank's own part included)
//   2-D mesh (2, n/2), registered when n is even:
//     S0S1_to_RR    [S(0),S(1)] -> [R,R]
//     S0S0_to_RR    [S(0),S(0)] -> [R,R]
//     RS0_to_S0R    [R,S(0)] -> [S(0),R]
//     SS02S0_to_RR  [SS(0,2),S(0)] -> [R,R]
//   For 2-D the raw time is the SUM of the per-step raw collectives of the cheapest plan we
//   know of (run back to back in one timed region; local slices and reorders count as free):
//     S0S1_to_RR, SS02S0_to_RR: all_gather of global/2 on mesh dim 1, then all_gather of the
//                               global bytes on mesh dim 0;
//     S0S0_to_RR: ONE all_gather of the global bytes on the flattened mesh (the rows are already
//                 in rank order: design.md section 3 merges adjacent mesh dims that change alike);
//     RS0_to_S0R: all_gather of the global bytes on mesh dim 1 (then R -> S(0) on mesh dim 0 is a
//                 local slice). Rank (i,j) holds row half j and needs half i, so a rank off the
//                 diagonal must receive global/2 bytes whatever the plan: that gather is the floor.
//   Each case's label prints the plan the planner really chose and the raw steps it is held
//   against: "S(0),S(1) -> R,R [d1:all_gather_v + d0:all_gather_v] raw [d1:all_gather +
//   d0:all_gather]" (d0,1: the flattened mesh; benchmarks/make_results.py reads it).
//
// Tensors: float32, global shape [rows, 256] with rows = bytes / 1024 (S(1) splits the 256
// columns; the _wide cases' [rows, 1024], rows = bytes / 4096), bytes = 4 KiB .. 256 MiB in
// powers of 4: the size in the name is the GLOBAL tensor's bytes. At 4 KiB there are 4 rows, so
// up to 4 ranks every shard is non-empty and even (the _wide cases have 1 row there).
// Values are zeros (speed does not depend on them). A Partial source is built as
// redistribute_any(distribute_tensor(zeros, mesh, R), P(sum)), since the public redistribute
// refuses Partial targets.
//
// Two raw baselines: "raw" writes into buffers made and zero-filled once (the floor: no page
// fault in a timed call), "raw allocating" makes each call's output as a user's call would
// (at::empty, so a fresh multi-MiB output page-faults in; the memcpy becomes a clone). The
// redistribute allocates its output in the timed call (from dtensor's buffer pool on the CPU,
// base/buffer_pool.h).
//
// Timing: per benchmark run the input is distributed once and the raw buffers are made and
// zero-filled (untimed), then one untimed warm-up of each. Each iteration times the raw
// collective(s), the allocating raw collective(s) and dt.redistribute(target), rotating which
// goes first, each as: barrier, time the call (+ device sync on nccl), all_reduce(max) of the
// elapsed seconds (outputs are destroyed after the clock stops). The redistribute's
// max-over-ranks time is Google Benchmark's manual time. Counters:
//   raw_us         mean raw time per iteration (max over ranks), µs
//   raw_allocating_us  the same for the allocating raw
//   ratio_to_raw   sum of redistribute times / sum of raw times (the target is <= 1.1)
//   ratio_to_raw_allocating  the same against the allocating raw
//   busbw_gbps     bus bytes / redistribute time / 1e9, where bus bytes = sum over the raw steps
//                  of (collective_bench size × nccl-tests factor of the step's group):
//                  2(n-1)/n all_reduce, (n-1)/n all_gather, reduce_scatter, all_to_all(_v);
//                  0 for the memcpy of R_to_S0. So for S0_to_R busbw is exactly collective_bench's
//                  all_gather busbw, and for S0_to_S1 / RG_to_RG the size is the per-rank shard.
//   raw_busbw_gbps the same bus bytes / raw time
//   bytes, ranks   the global tensor's bytes, the world size
// Names: redistribute/<case>/<backend>/<n>ranks/<bytes>, e.g.
// redistribute/S0_to_R/local/4ranks/1048576 (Google Benchmark appends "/manual_time").
//
// plan_cache_hit/<backend>/<n>ranks/<case>: plan_redistribute(spec, target placements) on a plan
// already cached (S0_to_R and S0S1_to_RR at 1 MiB), wall and CPU time per call of the calling
// rank alone (no collective; on "local" ranks 1..n-1 sleep meanwhile; under mpirun every rank
// measures itself and rank 0 prints). Target: <= 1 µs.
//
// Run (from the build directory; the flags are collective_bench's):
//   benchmarks/redistribute_bench --backend=local --ranks=4 --benchmark_min_time=0.05
//   mpirun -np 4 --oversubscribe benchmarks/redistribute_bench --backend=mpi
//   --benchmark_min_time=0.05
//   ... --benchmark_filter='^redistribute/S1_to_R/.*/1048576/'       # one case
//   ... --benchmark_filter=-/268435456/                               # all but 256 MiB
//   DTENSOR_SINGLE_RANK_COLLECTIVES=1 mpirun -np 1 -x DTENSOR_SINGLE_RANK_COLLECTIVES
//     benchmarks/redistribute_bench --backend=nccl   # one GPU: a one-rank group would
//                                                    # otherwise copy instead of communicating
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/base/check.h>
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

constexpr int64_t kMinBytes = int64_t{4} << 10;  // 4 KiB
constexpr int64_t kMaxBytes = int64_t{1} << 28;  // 256 MiB
constexpr int64_t kBytesStep = 4;
constexpr int64_t kColumns = 256;
constexpr int64_t kRowBytes = kColumns * static_cast<int64_t>(sizeof(float));
constexpr int64_t kWideColumns = 1024;

// ---------------------------------------------------------------------------
// Cases.

// Which communicator a raw step runs on.
enum class Group { kDim0, kDim1, kFlat };
// A raw step's size (collective_bench's convention) as a share of the global bytes.
enum class Share { kGlobal, kPerRank, kOverDim0 /* global / mesh.size(0) */ };

struct RawStep {
  // A bench::collectives() name; "ragged_all_to_all_v" (all_to_all_v with the counts of the
  // case's two Ragged placements) or "memcpy" (of the local shard; no communicator).
  std::string collective;
  Group group;
  Share share;
};

struct Case {
  std::string name;  // e.g. "S0_to_R"
  int mesh_ndim;
  std::string source;  // placements, e.g. "S(0),S(1)"
  std::string target;
  std::vector<RawStep> raw;
  // Whether each call gives its source up (`std::move(x).redistribute(...)`).
  bool gives_up_source = false;
  // A fixed iteration count, for a case whose own call is far shorter than
  // its raw contenders (which run in every iteration too): Google
  // Benchmark's count, sized by the case's time, would run them for minutes.
  int64_t iterations = 0;  // 0: Google Benchmark's choice
  int64_t columns = kColumns;  // of the global [rows, columns] tensor
};

std::string units_text(std::vector<int64_t> units) {
  std::string text;
  for (int64_t u : units) text += (text.empty() ? "" : ",") + std::to_string(u);
  return "RG(dims=1,units=[" + text + "])";
}
std::vector<int64_t> ascending_units(int n) {
  std::vector<int64_t> units(n);
  for (int i = 0; i < n; ++i) units[i] = i + 1;
  return units;
}
std::vector<int64_t> descending_units(int n) {
  std::vector<int64_t> units = ascending_units(n);
  std::reverse(units.begin(), units.end());
  return units;
}

// Every case for a world of n ranks; the order is the report order.
std::vector<Case> make_cases(int n) {
  const RawStep gather{"all_gather", Group::kDim0, Share::kGlobal};
  std::vector<Case> cases = {
      {"S0_to_R", 1, "S(0)", "R", {gather}},
      {"S1_to_R", 1, "S(1)", "R", {gather}},
      {"P_to_R", 1, "P(sum)", "R", {{"all_reduce", Group::kDim0, Share::kGlobal}}},
      {"P_to_S0", 1, "P(sum)", "S(0)", {{"reduce_scatter", Group::kDim0, Share::kGlobal}}},
      {"S0_to_S1", 1, "S(0)", "S(1)", {{"all_to_all", Group::kDim0, Share::kPerRank}}},
      {"S0_to_S1_wide", 1, "S(0)", "S(1)", {{"all_to_all", Group::kDim0, Share::kPerRank}},
       false, 0, kWideColumns},
      {"S1_to_S0_wide", 1, "S(1)", "S(0)", {{"all_to_all", Group::kDim0, Share::kPerRank}},
       false, 0, kWideColumns},
      {"R_to_S0", 1, "R", "S(0)", {{"memcpy", Group::kDim0, Share::kPerRank}}},
      {"P_to_R_given", 1, "P(sum)", "R", {{"all_reduce", Group::kDim0, Share::kGlobal}}, true},
      {"R_to_S0_given", 1, "R", "S(0)", {{"memcpy", Group::kDim0, Share::kPerRank}}, true, 200},
      {"RG_to_RG",
       1,
       units_text(ascending_units(n)),
       units_text(descending_units(n)),
       {{"ragged_all_to_all_v", Group::kDim0, Share::kPerRank}}},
  };
  if (n % 2 == 0) {
    const RawStep inner{"all_gather", Group::kDim1, Share::kOverDim0};
    const RawStep outer{"all_gather", Group::kDim0, Share::kGlobal};
    cases.push_back({"S0S1_to_RR", 2, "S(0),S(1)", "R,R", {inner, outer}});
    cases.push_back(
        {"S0S0_to_RR", 2, "S(0),S(0)", "R,R", {{"all_gather", Group::kFlat, Share::kGlobal}}});
    cases.push_back(
        {"RS0_to_S0R", 2, "R,S(0)", "S(0),R", {{"all_gather", Group::kDim1, Share::kGlobal}}});
    cases.push_back({"SS02S0_to_RR", 2, "SS(0,2),S(0)", "R,R", {inner, outer}});
  }
  return cases;
}

// The meshes every case runs on, built once per rank (collective over the world).
struct Meshes {
  DeviceMesh mesh1;
  std::optional<DeviceMesh> mesh2;      // (2, n/2) when n is even
  std::shared_ptr<Communicator> flat2;  // mesh2 flattened: one group of n in mesh order
};

Meshes make_meshes(const RankContext& ctx) {
  const int n = size_of(ctx);
  Meshes meshes{DeviceMesh(ctx.comm, {n}, {"x"}), std::nullopt, nullptr};
  if (n % 2 == 0) {
    meshes.mesh2.emplace(ctx.comm, std::vector<int64_t>{2, n / 2},
                         std::vector<std::string>{"dp", "tp"});
    meshes.flat2 = meshes.mesh2->flatten("dp_tp").communicator(0);
  }
  return meshes;
}

// "d1:all_gather + d0:all_gather": the raw steps a case is held against.
std::string raw_text(const Case& c) {
  std::string text;
  for (const RawStep& step : c.raw) {
    if (!text.empty()) text += " + ";
    if (step.collective == "memcpy") {
      text += "memcpy";
      continue;
    }
    text += step.group == Group::kDim0 ? "d0:" : step.group == Group::kDim1 ? "d1:" : "d0,1:";
    text += step.collective == "ragged_all_to_all_v" ? "all_to_all_v" : step.collective;
  }
  return text;
}

int64_t overlap(ChunkRange a, ChunkRange b) {
  return std::max<int64_t>(0, std::min(a.end, b.end) - std::max(a.begin, b.begin));
}

// ---------------------------------------------------------------------------
// One benchmark run of a case on one rank.

// Seconds of one iteration of each contender.
struct Times {
  double raw = 0;
  double raw_allocating = 0;
  double redistribute = 0;
};

class CaseRun {
 public:
  CaseRun(const RankContext& ctx, const Meshes& meshes, const Case& c, int64_t bytes)
      : ctx_(ctx), gives_up_source_(c.gives_up_source) {
    const DeviceMesh& mesh = c.mesh_ndim == 1 ? meshes.mesh1 : *meshes.mesh2;
    const int64_t rows = bytes / (c.columns * static_cast<int64_t>(sizeof(float)));
    const at::Tensor global = at::zeros({rows, c.columns}, ctx.options);
    if (c.source.rfind("P(", 0) == 0) {
      source_.emplace(redistribute_any(distribute_tensor(global, mesh, parse_placements("R")),
                                       parse_placements(c.source)));
    } else {
      source_.emplace(distribute_tensor(global, mesh, parse_placements(c.source)));
    }
    target_ = parse_placements(c.target);
    plan_ = bench::plan_text(*plan_redistribute(source_->spec(), target_));

    for (const RawStep& step : c.raw) {
      Raw raw;
      int64_t size = bytes;
      if (step.share == Share::kPerRank) size = bytes / size_of(ctx);
      if (step.share == Share::kOverDim0) size = bytes / mesh.size(0);
      if (step.collective == "memcpy") {
        const int64_t numel = size / static_cast<int64_t>(sizeof(float));
        raw.buffers.input = bench::zeros(ctx.options, numel);
        raw.buffers.output = bench::zeros(ctx.options, numel);
      } else {
        raw.comm = step.group == Group::kFlat
                       ? meshes.flat2
                       : mesh.communicator(step.group == Group::kDim0 ? 0 : 1);
        const int group = raw.comm->size();
        if (step.collective == "ragged_all_to_all_v") {
          raw.buffers = ragged_buffers(c, rows, *raw.comm);
          raw.collective = &bench::find_collective("all_to_all_v");
          bus_bytes_ += static_cast<double>(size) * bench::gather_scatter_factor(group);
        } else {
          const bench::Collective& collective = bench::find_collective(step.collective);
          raw.buffers = collective.prepare(*raw.comm, ctx.options, bench::numel_for(size, group));
          raw.collective = &collective;
          bus_bytes_ += static_cast<double>(size) * collective.bus_factor(group);
        }
      }
      raws_.push_back(std::move(raw));
    }
    run_raw(/*allocating=*/false);  // untimed warm-ups
    run_raw(/*allocating=*/true);
    redistribute_timed([](auto&& call) { call(); });
    bench::synchronize_device(ctx_);
  }

  // Seconds of each contender in iteration `i`, each the max over ranks;
  // which goes first rotates.
  Times time_one(int64_t i) {
    Times t;
    const std::array<std::function<void()>, 3> timed = {
        [&] { t.raw = bench::time_max_over_ranks(ctx_, [&] { run_raw(false); }); },
        [&] {
          std::vector<at::Tensor> outputs;
          t.raw_allocating = bench::time_max_over_ranks(ctx_, [&] { outputs = run_raw(true); });
        },
        [&] {
          redistribute_timed(
              [&](auto&& call) { t.redistribute = bench::time_max_over_ranks(ctx_, call); });
        }};
    for (size_t k = 0; k < timed.size(); ++k) timed[(i + k) % timed.size()]();
    return t;
  }

  double bus_bytes() const { return bus_bytes_; }
  const std::string& plan() const { return plan_; }

 private:
  struct Raw {
    std::shared_ptr<Communicator> comm;  // null: a memcpy
    const bench::Collective* collective = nullptr;
    Buffers buffers;
  };

  // all_to_all_v with the counts of c.source -> c.target (both Ragged over the rows).
  static Buffers ragged_buffers(const Case& c, int64_t rows, const Communicator& comm) {
    const PlacementPtr from_owner = parse_placement(c.source);
    const PlacementPtr to_owner = parse_placement(c.target);
    const auto* from = dynamic_cast<const Ragged*>(from_owner.get());
    const auto* to = dynamic_cast<const Ragged*>(to_owner.get());
    DTENSOR_CHECK(from != nullptr && to != nullptr, "redistribute_bench: ", c.name,
                  ": expected Ragged placements");
    const int n = comm.size();
    const int me = comm.rank();
    std::vector<int64_t> send(n), recv(n);
    for (int p = 0; p < n; ++p) {
      send[p] = overlap(from->row_range(rows, me), to->row_range(rows, p));
      recv[p] = overlap(from->row_range(rows, p), to->row_range(rows, me));
    }
    const at::TensorOptions options = at::TensorOptions().dtype(at::kFloat).device(comm.device());
    const int64_t held = from->row_range(rows, me).end - from->row_range(rows, me).begin;
    const int64_t needed = to->row_range(rows, me).end - to->row_range(rows, me).begin;
    return Buffers{at::zeros({held, kColumns}, options), at::zeros({needed, kColumns}, options),
                   std::move(send), std::move(recv)};
  }

  // Each raw step into the buffers made once, or `allocating` its output;
  // returns the outputs allocated, for the caller to free after its clock
  // stopped, as it does the redistribute's.
  std::vector<at::Tensor> run_raw(bool allocating) {
    std::vector<at::Tensor> outputs;
    for (Raw& raw : raws_) {
      if (!allocating && raw.comm == nullptr) {
        raw.buffers.output.copy_(raw.buffers.input);
      } else if (!allocating) {
        raw.collective->run(*raw.comm, raw.buffers);
      } else if (raw.comm == nullptr) {
        outputs.push_back(raw.buffers.input.clone());
      } else {
        outputs.push_back(raw.collective->run_allocating(*raw.comm, raw.buffers));
      }
    }
    return outputs;
  }

  // One redistribute, the call handed to `time` (which runs it once); the
  // output is destroyed after. A case that gives its source up gets a source
  // only it holds, made before the call: the first a copy of the source, each
  // later one on the memory of the previous output, which is the source's
  // memory again (P -> R reduced in it, R -> S(0) viewed it), so that no
  // iteration copies the source.
  template <typename Time>
  void redistribute_timed(Time time) {
    if (!gives_up_source_) {
      std::optional<DTensor> out;
      time([&] { out.emplace(source_->redistribute(target_)); });
      return;
    }
    std::optional<DTensor> given = next_source_to_give();
    const c10::StorageImpl* memory = given->to_local().storage().unsafeGetStorageImpl();
    std::optional<DTensor> out;
    time([&] { out.emplace(std::move(*given).redistribute(target_)); });
    DTENSOR_CHECK(out->to_local().storage().unsafeGetStorageImpl() == memory,
                  "redistribute_bench: a given-up source's memory was not reused");
    given.reset();
    last_output_ = std::move(out);
  }

  std::optional<DTensor> next_source_to_give() {
    if (!last_output_) {
      return DTensor(pooled_clone(source_->to_local()), source_->spec_ptr());
    }
    at::Storage memory = last_output_->to_local().storage();
    last_output_.reset();
    const at::Tensor& shape_of = source_->to_local();
    at::Tensor local =
        at::empty({0}, shape_of.options()).set_(std::move(memory), 0, shape_of.sizes());
    return DTensor(std::move(local), source_->spec_ptr());
  }

  const RankContext& ctx_;
  bool gives_up_source_;
  std::optional<DTensor> last_output_;  // of a case that gives its source up
  std::optional<DTensor> source_;
  std::vector<PlacementPtr> target_;
  std::string plan_;
  std::vector<Raw> raws_;
  double bus_bytes_ = 0;
};

// ---------------------------------------------------------------------------
// Google Benchmark.

// Command ids index the cases.
class RedistributeBenchRank final : public BenchRank {
 public:
  explicit RedistributeBenchRank(const RankContext& ctx)
      : BenchRank(ctx), meshes_(make_meshes(ctx)), cases_(make_cases(size_of(ctx))) {}

  void register_benchmarks() override {
    const std::string suffix = "/" + std::string(ctx().comm->backend_name()) + "/" +
                               std::to_string(size_of(ctx())) + "ranks/";
    for (int c = 0; c < static_cast<int>(cases_.size()); ++c) {
      for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= kBytesStep) {
        const std::string name = "redistribute/" + cases_[c].name + suffix + std::to_string(bytes);
        benchmark::internal::Benchmark* registered = benchmark::RegisterBenchmark(
            name.c_str(), [this, c, bytes](benchmark::State& state) { run_case(state, c, bytes); });
        registered->UseManualTime()->Unit(benchmark::kMicrosecond);
        if (cases_[c].iterations > 0) registered->Iterations(cases_[c].iterations);
      }
    }
    for (int c = 0; c < static_cast<int>(cases_.size()); ++c) {
      if (cases_[c].name != "S0_to_R" && cases_[c].name != "S0S1_to_RR") continue;
      const std::string name = "plan_cache_hit" + suffix + cases_[c].name;
      benchmark::RegisterBenchmark(name.c_str(), [this, c](benchmark::State& state) {
        run_plan_cache_hit(state, cases_[c]);
      })->Unit(benchmark::kNanosecond);
    }
  }

  void follow(const Command& command) override {
    CaseRun run(ctx(), meshes_, cases_[command.id], command.bytes);
    for (int64_t i = 0; i < command.iterations; ++i) run.time_one(i);
  }

  std::string describe(const Command& c) const override {
    return cases_[c.id].name + " of " + std::to_string(c.bytes) + " bytes, " +
           std::to_string(c.iterations) + " iterations";
  }

 private:
  void run_case(benchmark::State& state, int c, int64_t bytes) {
    announce(Command{c, bytes, static_cast<int64_t>(state.max_iterations)});
    CaseRun run(ctx(), meshes_, cases_[c], bytes);
    Times sum;
    int64_t i = 0;
    for (auto _ : state) {
      const Times t = run.time_one(i++);
      state.SetIterationTime(t.redistribute);
      sum.raw += t.raw;
      sum.raw_allocating += t.raw_allocating;
      sum.redistribute += t.redistribute;
    }
    const double iterations = static_cast<double>(state.iterations());
    state.counters["raw_us"] = sum.raw / iterations * 1e6;
    state.counters["raw_allocating_us"] = sum.raw_allocating / iterations * 1e6;
    state.counters["ratio_to_raw"] = sum.redistribute / sum.raw;
    state.counters["ratio_to_raw_allocating"] = sum.redistribute / sum.raw_allocating;
    state.counters["busbw_gbps"] = run.bus_bytes() * iterations / sum.redistribute / 1e9;
    state.counters["raw_busbw_gbps"] = run.bus_bytes() * iterations / sum.raw / 1e9;
    state.counters["bytes"] =
        benchmark::Counter(static_cast<double>(bytes), benchmark::Counter::kDefaults,
                           benchmark::Counter::OneK::kIs1024);
    state.counters["ranks"] = size_of(ctx());
    state.SetLabel(cases_[c].source + " -> " + cases_[c].target + " [" + run.plan() + "] raw [" +
                   raw_text(cases_[c]) + "]");
  }

  // No collective: the calling rank alone (see the header comment).
  void run_plan_cache_hit(benchmark::State& state, const Case& c) {
    const DeviceMesh& mesh = c.mesh_ndim == 1 ? meshes_.mesh1 : *meshes_.mesh2;
    const int64_t rows = (int64_t{1} << 20) / kRowBytes;  // 1 MiB
    const DTensorSpec spec(mesh, parse_placements(c.source), {rows, kColumns}, at::kFloat);
    const std::vector<PlacementPtr> target = parse_placements(c.target);
    const RedistributePlanPtr first = plan_redistribute(spec, target);  // the miss: untimed
    for (auto _ : state) {
      const RedistributePlanPtr plan = plan_redistribute(spec, target);
      benchmark::DoNotOptimize(&plan);
    }
    DTENSOR_CHECK(plan_redistribute(spec, target) == first,
                  "redistribute_bench: plan_cache_hit: the plan was not cached");
    state.SetLabel(c.source + " -> " + c.target + " [" + bench::plan_text(*first) + "]");
  }

  Meshes meshes_;
  std::vector<Case> cases_;
};

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  return dtensor::bench::bench_main(
      argc, argv, {"redistribute_bench", [](const dtensor::bench::RankContext& ctx) {
                     return std::make_unique<dtensor::RedistributeBenchRank>(ctx);
                   }});
}
