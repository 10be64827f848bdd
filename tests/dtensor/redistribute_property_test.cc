// Copyright 2026 The dtensor Authors.
//
// Property test of redistribute (design.md section 7): random meshes, shapes
// (even, uneven, empty shards) and placement pairs on the local backend;
// distribute -> redistribute must equal a direct distribute to the target,
// and full_tensor must give back the input exactly.
#include <atomic>
#include <chrono>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/placements/spec.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/support/default_paths_communicator.h"
#include "tests/support/redistribute_cases.h"

namespace dtensor {
namespace {

using Shape = std::vector<int64_t>;
using testing::RedistributeCaseTotals;

// Runs `cases` random cases on a mesh of `mesh_shape` of `backend` (every
// rank draws the same sequence from `seed`).
void run_mesh(const Shape& mesh_shape, int64_t cases, uint32_t seed, RedistributeCaseTotals& totals,
              const char* backend = "local") {
  int world = 1;
  for (int64_t n : mesh_shape) world *= static_cast<int>(n);
  std::string current;  // rank 0's case, for errors thrown out of run_ranks
  try {
    run_ranks(world, [&](int) {
      testing::run_random_redistribute_cases(init_device_mesh(backend, mesh_shape), cases, seed,
                                             totals, &current);
    });
  } catch (const std::exception& e) {
    totals.fail("mesh " + ::testing::PrintToString(mesh_shape) + " threw during [" + current +
                "]: " + e.what());
  }
}

TEST(RedistributePropertyTest, RandomLayoutsRoundTrip) {
  const auto start = std::chrono::steady_clock::now();
  // (mesh shape, cases): weighted so that every shape gets a fair share of the
  // ~20 s budget; bigger meshes cost more per case (more threads, 2 cores).
  const std::vector<std::pair<Shape, int64_t>> meshes = {
      {{1}, 225},    {{2}, 600},       {{3}, 600},       {{4}, 750},
      {{5}, 375},    {{8}, 375},       {{2, 2}, 750},    {{3, 2}, 450},
      {{2, 3}, 450}, {{4, 2}, 450},    {{2, 4}, 450},    {{1, 4}, 225},
      {{4, 1}, 225}, {{2, 2, 2}, 600}, {{2, 1, 3}, 300}, {{1, 2, 2}, 225},
  };
  RedistributeCaseTotals totals;
  uint32_t seed = 20260;
  for (const auto& [mesh_shape, cases] : meshes) {
    const auto mesh_start = std::chrono::steady_clock::now();
    run_mesh(mesh_shape, cases, seed++, totals);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - mesh_start).count();
    std::cout << "  mesh " << ::testing::PrintToString(mesh_shape) << ": " << cases << " drawn, "
              << seconds << " s" << std::endl;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "redistribute property test: " << totals.cases << " cases ran, " << totals.skipped
            << " skipped (invalid placements), " << totals.failures << " failures, " << seconds
            << " s" << std::endl;
  std::cout << "  collectives per case:";
  for (const auto& [n, count] : totals.collectives_histogram) std::cout << " " << n << "x" << count;
  std::cout << "\n  cases with more collectives than changed mesh dims: " << totals.over_changed
            << std::endl;
  for (const std::string& example : totals.over_examples) std::cout << "    " << example << "\n";
  for (const std::string& message : totals.messages) ADD_FAILURE() << message;
  EXPECT_EQ(totals.failures, 0);
  EXPECT_GE(totals.cases, 5000) << "too few cases ran";
}

// The same cases through Communicator's default along-dim collectives and
// exchange, which the local and MPI backends override and NCCL runs.
TEST(RedistributePropertyTest, RandomLayoutsRoundTripThroughTheDefaultPaths) {
  testing::register_default_paths_backend();
  RedistributeCaseTotals totals;
  uint32_t seed = 31337;
  for (const auto& [mesh_shape, cases] : std::vector<std::pair<Shape, int64_t>>{
           {{3}, 300}, {{4}, 300}, {{2, 2}, 300}, {{2, 3}, 200}, {{2, 2, 2}, 200}}) {
    run_mesh(mesh_shape, cases, seed++, totals, "local_default_paths");
  }
  for (const std::string& message : totals.messages) ADD_FAILURE() << message;
  EXPECT_EQ(totals.failures, 0);
  EXPECT_GE(totals.cases, 800) << "too few cases ran";
  run_ranks(4, [](int) {
    testing::check_issue_collective_counts(init_device_mesh("local_default_paths", {2, 2}));
  });
}

}  // namespace
}  // namespace dtensor
