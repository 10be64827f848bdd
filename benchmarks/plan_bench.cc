// Copyright 2026 The dtensor Authors.
//
// benchmarks/plan_bench.cc: what planning a redistribute costs, on 3-D and
// 4-D meshes with every placement kind, without and with the plan cache
// (issue 19: at most 20 µs uncached, 0.2 µs cached).
//
// Each case plans `plan_redistribute(source spec, target placements)`, the
// call DTensor::redistribute and the op runner make:
//   plan/uncached/<mesh>/<case>  the plan cache emptied before each call (the
//                                clearing is inside the timed region: it is
//                                part of what a miss costs, and small)
//   plan/cached/<mesh>/<case>    the plan already cached
// Counters: steps (of the plan), goal_us (20 uncached, 0.2 cached). The label
// is the plan's steps, as redistribute_bench prints them.
//
// The meshes, (2,2,2) and (2,2,2,2), are built by 8 and 16 ranks of the local
// backend; planning needs no collective, so world rank 0 plans alone, the
// others done once the meshes exist. Tensors are float32 of
// shape [64, 48, 32] (3-D) and [64, 48, 32, 16] (4-D).
//
//   benchmarks/plan_bench
//   benchmarks/plan_bench --benchmark_filter=uncached/2x2x2x2
#include <cstdint>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/placements/spec.h>
#include <dtensor/redistribute/planner.h>
#include <dtensor/redistribute/transition.h>
#include "benchmarks/bench_support.h"

namespace dtensor {
namespace {

constexpr double kUncachedGoalMicros = 20;
constexpr double kCachedGoalMicros = 0.2;

struct Case {
  const char* name;
  const char* source;
  const char* target;
};

// Every placement kind on each mesh: Shard, StridedShard, Ragged (units per
// mesh dim of size 2), Partial and Replicate, as sources and as targets.
const std::vector<Case>& cases_3d() {
  static const std::vector<Case> cases = {
      {"gather_all", "S(0),S(1),S(2)", "R,R,R"},
      {"reduce_to_shards", "P(sum),P(sum),S(0)", "S(0),S(1),R"},
      {"permute_shards", "S(0),S(1),S(2)", "S(2),S(0),S(1)"},
      {"strided_to_shard", "SS(0,2),S(0),R", "R,S(1),S(0)"},
      {"ragged_to_shard", "RG(dims=1,units=[1,3]),R,S(1)", "S(0),S(1),R"},
      {"replicate_to_mixed", "R,R,R", "S(0),SS(1,2),P(sum)"},
  };
  return cases;
}

const std::vector<Case>& cases_4d() {
  static const std::vector<Case> cases = {
      {"gather_all", "S(0),S(1),S(2),S(3)", "R,R,R,R"},
      {"reduce_to_shards", "P(sum),P(sum),S(0),P(sum)", "S(0),S(1),R,S(2)"},
      {"permute_shards", "S(0),S(1),S(2),S(3)", "S(3),S(2),S(1),S(0)"},
      {"strided_to_shard", "SS(0,2),S(0),R,S(1)", "R,S(1),S(0),S(2)"},
      {"ragged_to_shard", "RG(dims=1,units=[1,3]),R,S(1),P(sum)", "S(0),S(1),R,R"},
      {"replicate_to_mixed", "R,R,R,R", "S(0),SS(1,2),P(sum),S(3)"},
  };
  return cases;
}

void run_case(benchmark::State& state, const DeviceMesh& mesh, const std::vector<int64_t>& shape,
              const Case& c, bool cached) {
  const DTensorSpec spec(mesh, parse_placements(c.source), shape, at::kFloat);
  const std::vector<PlacementPtr> target = parse_placements(c.target);
  const RedistributePlanPtr first = plan_redistribute(spec, target);  // untimed
  for (auto _ : state) {
    if (!cached) clear_plan_cache();
    const RedistributePlanPtr plan = plan_redistribute(spec, target);
    benchmark::DoNotOptimize(&plan);
  }
  state.counters["steps"] = static_cast<double>(first->steps.size());
  state.counters["expanded"] = static_cast<double>(first->states_expanded);
  state.counters["goal_us"] = cached ? kCachedGoalMicros : kUncachedGoalMicros;
  state.SetLabel(std::string(c.source) + " -> " + c.target + " [" + bench::plan_text(*first) + "]");
}

void register_mesh(const DeviceMesh& mesh, const std::vector<int64_t>& shape,
                   const std::vector<Case>& cases) {
  std::string mesh_name;
  for (int64_t size : mesh.shape())
    mesh_name += (mesh_name.empty() ? "" : "x") + std::to_string(size);
  for (const bool cached : {false, true}) {
    for (const Case& c : cases) {
      const std::string name =
          std::string("plan/") + (cached ? "cached/" : "uncached/") + mesh_name + "/" + c.name;
      benchmark::RegisterBenchmark(name.c_str(), [&mesh, &shape, &c, cached](benchmark::State& s) {
        run_case(s, mesh, shape, c, cached);
      })->Unit(benchmark::kNanosecond);
    }
  }
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Initialize leaves the flags it does not know in argv: fail on them
  // rather than run with a typo silently ignored.
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  at::set_num_threads(1);
  size_t ran = 0;
  dtensor::run_ranks(16, [&ran](int rank) {
    using dtensor::DeviceMesh;
    // Collective over the world: every rank builds both meshes, the 3-D one
    // over world ranks 0..7.
    const DeviceMesh mesh4(dtensor::local_world(), {2, 2, 2, 2});
    const DeviceMesh mesh3(dtensor::local_world(), {2, 2, 2}, {}, {0, 1, 2, 3, 4, 5, 6, 7});
    if (rank != 0) return;
    const std::vector<int64_t> shape3 = {64, 48, 32};
    const std::vector<int64_t> shape4 = {64, 48, 32, 16};
    dtensor::register_mesh(mesh3, shape3, dtensor::cases_3d());
    dtensor::register_mesh(mesh4, shape4, dtensor::cases_4d());
    ran = benchmark::RunSpecifiedBenchmarks();
  });
  benchmark::Shutdown();
  // A filter that matched nothing fails, so a smoke test cannot go stale.
  return ran > 0 ? 0 : 1;
}
