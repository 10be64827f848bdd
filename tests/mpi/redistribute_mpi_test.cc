// Copyright 2026 The dtensor Authors.
//
// Redistribute across MPI processes: the random cases of the local suite, in a
// smaller number, and the collective counts the issue names, on 4 ranks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dtensor/dtensor.h"
#include "dtensor/redistribute/collective_counter.h"
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
  DeviceMesh mesh = init_device_mesh("mpi", {2, 2}, {"dp", "tp"});
  const at::Tensor global = at::arange(7 * 6, at::kFloat).reshape({7, 6});
  struct Case {
    const char* from;
    const char* to;
    int64_t most;
  };
  for (const Case& c : {Case{"S(0),S(1)", "S(0),S(0)", 1}, Case{"S(0),S(1)", "S(1),S(0)", 2},
                        Case{"S(0),S(0)", "S(1),S(1)", 2}, Case{"P(sum),R", "R,R", 1}}) {
    SCOPED_TRACE(std::string(c.from) + " -> " + c.to);
    DTensor source =
        c.from[0] == 'P'
            ? redistribute_any(distribute_tensor(global, mesh, parse_placements("R,R")),
                               parse_placements(c.from))
            : distribute_tensor(global, mesh, parse_placements(c.from));
    CollectiveCounter counter;
    DTensor target = source.redistribute(parse_placements(c.to));
    EXPECT_LE(counter.total(), c.most);
    EXPECT_GE(counter.total(), 1);
    EXPECT_TRUE(at::equal(target.to_local(),
                          distribute_tensor(global, mesh, parse_placements(c.to)).to_local()));
    EXPECT_TRUE(at::equal(target.full_tensor(), global));
  }
}

}  // namespace
}  // namespace dtensor
