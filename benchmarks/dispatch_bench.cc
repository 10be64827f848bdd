// Copyright 2026 The dtensor Authors.
//
// benchmarks/dispatch_bench.cc: what running an ATen op on DTensors costs
// beyond the op itself (design.md section 6: <= 2 us with a cached
// propagation, <= 50 us on the first call of a new shape).
//
// Each case times the DTensor op and the same op on the local shards in
// alternation (each going first every other iteration), and reports
//   overhead_us = (sum of DTensor op times - sum of local op times) / iterations
// Google Benchmark's own time column is the DTensor op. Inputs are [64, 64]
// float32, S(0) (the mm weight Replicate), on a mesh of one rank of the local
// backend: the dispatch path (unwrap, cache lookup, wrap) is the one every
// rank runs, and no case needs communication. `cached` cases take 8 operand
// sets in turn, of equal layouts whose specs are copies (equal, not shared:
// the slower case of the cache's comparisons; distribute_tensor alone would
// give them one spec). `first_call` cases use a shape
// no call in the process has used before on every iteration, so the
// propagation cache misses also under --benchmark_repetitions: [8 + i, 65 + k]
// on iteration i of first_call run k, from 0 (the mm weight [65 + k, 64]).
//
//   benchmarks/dispatch_bench --benchmark_repetitions=3
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/placements/spec.h>

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

constexpr int kFirstCalls = 400;  // iterations of a first_call run

struct Shape {
  int64_t rows, cols;
};

constexpr Shape kCachedShape = {64, 64};
// Operand sets a cached case takes in turn: DTensors of equal layouts whose
// specs are equal, not shared (see the top).
constexpr int kCachedOperandSets = 8;

// A shape no earlier call in the process got, so a first_call iteration
// misses the cache even when its case runs again (repetitions): the counter
// is process-wide, not per run. Rows cycle through [8, 8 + kFirstCalls) and
// the columns, from 65 on, grow by one per cycle: every shape is distinct,
// none is kCachedShape, and they stay small (r runs: [407, 64 + r] at most).
Shape unseen_shape() {
  static std::atomic<int64_t> calls{0};
  const int64_t n = calls.fetch_add(1, std::memory_order_relaxed);
  return {8 + n % kFirstCalls, kCachedShape.cols + 1 + n / kFirstCalls};
}

struct Operands {
  DTensor a, second;
};

// `t` with a copy of its spec: distribute_tensor gives every DTensor of one
// layout the same spec (the redistribute plan's target).
DTensor unshared(const DTensor& t) {
  return DTensor(t.to_local(), std::make_shared<const DTensorSpec>(t.spec()));
}

// `a` of `shape`; the second operand the same shape, or the mm weight
// [shape.cols, 64].
Operands make_operands(const DeviceMesh& mesh, const Case& c, Shape shape) {
  const at::Tensor a = at::randn({shape.rows, shape.cols});
  const bool is_mm = std::string(c.name) == "mm";
  const at::Tensor b = is_mm ? at::randn({shape.cols, 64}) : at::randn({shape.rows, shape.cols});
  return {unshared(distribute_tensor(a, mesh, parse_placements("S(0)"))),
          unshared(distribute_tensor(b, mesh, parse_placements(is_mm ? "R" : "S(0)")))};
}

std::vector<Operands> unseen_operands(const DeviceMesh& mesh, const Case& c, int64_t count) {
  std::vector<Operands> operands;
  operands.reserve(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) operands.push_back(make_operands(mesh, c, unseen_shape()));
  return operands;
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// Times `op` on `a` and `b`, keeping the result alive while the other half
// runs (so neither reuses the other's freed output).
double time_op(const Op& op, const at::Tensor& a, const at::Tensor& b, at::Tensor& result) {
  const auto start = Clock::now();
  result = op(a, b);
  return seconds(Clock::now() - start);
}

// Times `c` on `operands[i % size]` and on their shards, alternating which
// runs first: the first reads inputs that may be out of the CPU's caches (a
// first_call case's operands were made long before), the second finds them
// there, and neither half should pay that alone.
void run_case(benchmark::State& state, const Case& c, const std::vector<Operands>& operands) {
  double dtensor_total = 0, local_total = 0;
  size_t i = 0;
  for (auto _ : state) {
    const Operands& in = operands[i % operands.size()];
    const at::Tensor la = in.a.to_local(), lb = in.second.to_local();
    at::Tensor d, l;
    double dtensor_time, local_time;
    // The order also flips with each pass over the operand sets, so that
    // each set (8 of them, an even number) takes both.
    if ((i + i / operands.size()) % 2 == 0) {
      dtensor_time = time_op(c.op, in.a, in.second, d);
      local_time = time_op(c.op, la, lb, l);
    } else {
      local_time = time_op(c.op, la, lb, l);
      dtensor_time = time_op(c.op, in.a, in.second, d);
    }
    benchmark::DoNotOptimize(d);
    benchmark::DoNotOptimize(l);
    dtensor_total += dtensor_time;
    local_total += local_time;
    state.SetIterationTime(dtensor_time);
    ++i;
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["overhead_us"] = (dtensor_total - local_total) / n * 1e6;
  state.counters["local_us"] = local_total / n * 1e6;
}

void register_cases(const DeviceMesh& mesh) {
  for (const Case& c : cases()) {
    std::vector<Operands> cached;
    for (int k = 0; k < kCachedOperandSets; ++k) {
      cached.push_back(make_operands(mesh, c, kCachedShape));
    }
    benchmark::RegisterBenchmark((std::string("cached/") + c.name).c_str(),
                                 [c, cached](benchmark::State& s) { run_case(s, c, cached); })
        ->UseManualTime();
    // The operands are made when each run starts, not here, so that every
    // run (each repetition too) gets shapes of its own.
    benchmark::RegisterBenchmark((std::string("first_call/") + c.name).c_str(),
                                 [c, mesh](benchmark::State& s) {
                                   run_case(s, c, unseen_operands(mesh, c, s.max_iterations));
                                 })
        ->UseManualTime()
        ->Iterations(kFirstCalls);
  }
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  // Initialize leaves the flags it does not know in argv: fail on them, as
  // bench_main does for the other programs, rather than run with a typo
  // silently ignored.
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
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
