// Copyright 2026 The dtensor Authors.
//
// Redistribute across MPI processes: the random cases of the local suite, in a
// smaller number, and the collective counts the issue names, on 4 ranks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dtensor/dtensor.h"
#include "mesh/communicator.h"
#include "mesh/device_mesh.h"
#include "placements/placements.h"
#include "tests/support/redistribute_cases.h"

namespace dtensor {
namespace {

void skip_unless_four_ranks() {
  if (make_world_communicator("mpi")->size() != 4) GTEST_SKIP() << "needs mpirun -np 4";
}

TEST(MpiRedistributeTest, RandomCasesRoundTrip) {
  skip_unless_four_ranks();
  uint32_t seed = 7100;
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{4}, {2, 2}, {1, 4}}) {
    testing::RedistributeCaseTotals totals;
    DeviceMesh mesh = init_device_mesh("mpi", shape);
    testing::run_random_redistribute_cases(mesh, 120, seed++, totals);
    for (const std::string& message : totals.messages) ADD_FAILURE() << message;
    EXPECT_EQ(totals.failures, 0);
    if (make_world_communicator("mpi")->rank() == 0) EXPECT_GE(totals.cases, 80);
  }
}

TEST(MpiRedistributeTest, IssueCollectiveCounts) {
  skip_unless_four_ranks();
  testing::check_issue_collective_counts(init_device_mesh("mpi", {2, 2}, {"dp", "tp"}));
}

}  // namespace
}  // namespace dtensor
