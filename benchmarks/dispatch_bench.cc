// Copyright 2026 The dtensor Authors.
//
// benchmarks/dispatch_bench.cc: what running an ATen op on DTensors costs
// beyond the op itself (design.md section 6: <= 2 us with a cached
// propagation, <= 50 us on the first call of a new shape).
//
// Each case times the DTensor op and the same op on the local shards in
// alternation, and reports
//   overhead_us = (sum of DTensor op times - sum of local op times) / iterations
// Google Benchmark's own time column is the DTensor op. Inputs are [64, 64]
// float32, S(0) (the mm weight Replicate), on a mesh of one rank of the local
// backend: the dispatch path (unwrap, cache lookup, wrap) is the one every
// rank runs, and no case needs communication. `first_call` cases use a new
// shape ([8 + i, 64]) every iteration, so the propagation cache misses.
//
//   benchmarks/dispatch_bench --benchmark_repetitions=3
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <chrono>
#include <functional>
#include <vector>

#include "dtensor/dtensor.h"
#include "mesh/local_communicator.h"
#include "placements/placements.h"

namespace dtensor {
namespace {

using Clock = std::chrono::steady_clock;
using Op = std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>;

struct Case {
  const char* name;
  Op op;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> all = {
      {"add", [](const at::Tensor& a, const at::Tensor& b) { return a + b; }},
      {"mm", [](const at::Tensor& a, const at::Tensor& w) { return at::mm(a, w); }},
      {"relu", [](const at::Tensor& a, const at::Tensor&) { return at::relu(a); }},
      {"sum_dim1", [](const at::Tensor& a, const at::Tensor&) { return a.sum(1); }},
      {"view_flatten", [](const at::Tensor& a, const at::Tensor&) { return a.view({-1}); }},
      {"t", [](const at::Tensor& a, const at::Tensor&) { return a.t(); }},
  };
  return all;
}

struct Operands {
  DTensor a, second;
};

Operands make_operands(const DeviceMesh& mesh, const Case& c, int64_t rows) {
  const at::Tensor a = at::randn({rows, 64});
  const bool is_mm = std::string(c.name) == "mm";
  const at::Tensor b = is_mm ? at::randn({64, 64}) : at::randn({rows, 64});
  return {distribute_tensor(a, mesh, parse_placements("S(0)")),
          distribute_tensor(b, mesh, parse_placements(is_mm ? "R" : "S(0)"))};
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Times `c` on `operands[i % size]` and on their shards, alternating.
void run_case(benchmark::State& state, const Case& c, const std::vector<Operands>& operands) {
  double dtensor_total = 0, local_total = 0;
  size_t i = 0;
  for (auto _ : state) {
    const Operands& in = operands[i++ % operands.size()];
    const at::Tensor la = in.a.to_local(), lb = in.second.to_local();
    const auto t0 = Clock::now();
    at::Tensor d = c.op(in.a, in.second);
    const auto t1 = Clock::now();
    at::Tensor l = c.op(la, lb);
    const auto t2 = Clock::now();
    benchmark::DoNotOptimize(d);
    benchmark::DoNotOptimize(l);
    dtensor_total += seconds(t1 - t0);
    local_total += seconds(t2 - t1);
    state.SetIterationTime(seconds(t1 - t0));
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["overhead_us"] = (dtensor_total - local_total) / n * 1e6;
  state.counters["local_us"] = local_total / n * 1e6;
}

void register_cases(const DeviceMesh& mesh) {
  constexpr int kFirstCalls = 400;
  for (const Case& c : cases()) {
    std::vector<Operands> cached = {make_operands(mesh, c, 64)};
    benchmark::RegisterBenchmark((std::string("cached/") + c.name).c_str(),
                                 [c, cached](benchmark::State& s) { run_case(s, c, cached); })
        ->UseManualTime();
    std::vector<Operands> fresh;
    for (int i = 0; i < kFirstCalls; ++i) fresh.push_back(make_operands(mesh, c, 8 + i));
    benchmark::RegisterBenchmark((std::string("first_call/") + c.name).c_str(),
                                 [c, fresh](benchmark::State& s) { run_case(s, c, fresh); })
        ->UseManualTime()
        ->Iterations(kFirstCalls);
  }
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  at::manual_seed(0);
  at::set_num_threads(1);
  dtensor::run_ranks(1, [](int) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {1});
    dtensor::register_cases(mesh);
    benchmark::RunSpecifiedBenchmarks();
  });
  benchmark::Shutdown();
  return 0;
}
