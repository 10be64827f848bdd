// Copyright 2026 The dtensor Authors.
//
// Redistribute across MPI processes: the random cases of the local suite, in a
// smaller number, and the collective counts the issue names, on 4 ranks.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/communicator.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
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
    if (make_world_communicator("mpi")->rank() == 0) {
      EXPECT_GE(totals.cases, 80);
    }
  }
}

TEST(MpiRedistributeTest, IssueCollectiveCounts) {
  skip_unless_four_ranks();
  testing::check_issue_collective_counts(init_device_mesh("mpi", {2, 2}, {"dp", "tp"}));
}

// Mesh dims 0 and 2 are not adjacent: [P,R,P] -> [R,R,R] is still one
// all-reduce, on a communicator split out of the mesh's own by MPI (ranks
// listed out of order, so group order is the mesh's, not the world's).
TEST(MpiRedistributeTest, NonAdjacentPartialsReduceInOneAllReduce) {
  skip_unless_four_ranks();
  DeviceMesh mesh(make_world_communicator("mpi"), {2, 1, 2}, {}, {3, 1, 2, 0});
  const at::Tensor global = at::arange(35, at::kDouble).reshape({7, 5});
  const std::vector<int64_t>& c = mesh.coordinate();
  const DTensor terms =
      from_local(global * (1 + c[0] + 2 * c[2]), mesh, parse_placements("P(sum),R,P(sum)"));
  CollectiveCounter counter;
  const DTensor sum = terms.redistribute(parse_placements("R,R,R"));
  EXPECT_EQ(counter.total(), 1);
  EXPECT_EQ(counter.count("all_reduce"), 1);
  EXPECT_TRUE(at::equal(sum.to_local(), global * 10));
  const DTensor rows = distribute_tensor(global, mesh, parse_placements("S(0),R,S(0)"));
  EXPECT_TRUE(at::equal(rows.redistribute(parse_placements("R,R,R")).to_local(), global));
}

// A lazy conjugate or negation given as a local shard is laid out by its
// values, not by the bytes under it.
TEST(MpiRedistributeTest, LazyConjugatesAndNegationsKeepTheirValues) {
  skip_unless_four_ranks();
  DeviceMesh mesh = init_device_mesh("mpi", {4});
  const int64_t rank = mesh.coordinate()[0];
  const at::Tensor global = at::complex(at::arange(12, at::kFloat).reshape({4, 3}),
                                        at::arange(12, at::kFloat).neg().reshape({4, 3}));
  const DTensor conjugated =
      from_local(global.narrow(0, rank, 1).conj(), mesh, {Shard::make(0)}, {});
  EXPECT_TRUE(at::equal(conjugated.full_tensor(), global.conj().resolve_conj()));
  const at::Tensor real = at::arange(12, at::kFloat).reshape({4, 3});
  const DTensor negated =
      distribute_tensor(at::_neg_view(real), mesh, {Shard::make(1)}, /*src_rank=*/0);
  EXPECT_TRUE(at::equal(negated.full_tensor(), real.neg()));
}

}  // namespace
}  // namespace dtensor
