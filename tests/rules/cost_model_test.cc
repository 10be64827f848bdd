// Copyright 2026 The dtensor Authors.
//
// One cost model (rules/cost.h): what propagation estimates for changing one
// mesh dim is exactly what the planner's plan for that change costs.
#include <dtensor/rules/cost.h>

#include <gtest/gtest.h>

#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/planner.h>

namespace dtensor {
namespace {

TEST(CostModelTest, PropagationPricesAChangeAsThePlannerDoes) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const std::vector<int64_t> shape = {8, 8};
    const int64_t bytes = 8 * 8 * 4;  // float32
    for (const auto& [from, to] : std::vector<std::pair<const char*, const char*>>{
             {"S(0)", "R"}, {"P(sum)", "R"}, {"P(sum)", "S(0)"}, {"R", "S(0)"}, {"S(0)", "S(1)"}}) {
      SCOPED_TRACE(std::string(from) + " -> " + to);
      const DTensorSpec source(mesh, parse_placements(from), shape, at::kFloat);
      const RedistributePlanPtr plan = plan_redistribute(source, parse_placements(to));
      ASSERT_EQ(plan->steps.size(), 1u);
      EXPECT_DOUBLE_EQ(plan->total_cost,
                       placement_change_cost(*parse_placement(from), *parse_placement(to), bytes, 4,
                                             mesh.collective_costs()));
    }
  });
}

TEST(CostModelTest, StepKindsRankAsExpected) {
  const CollectiveCosts costs;
  EXPECT_EQ(step_cost(StepKind::kLocalCopy, 0, 0, costs), costs.local_step_us);
  EXPECT_EQ(step_cost(StepKind::kCollective, 0, 3, costs), costs.latency_us);
  // An all-to-all with several peers weighs its bytes more; with one peer it
  // is a plain exchange.
  EXPECT_GT(step_cost(StepKind::kAllToAll, 1 << 20, 3, costs),
            step_cost(StepKind::kCollective, 1 << 20, 3, costs));
  EXPECT_EQ(step_cost(StepKind::kAllToAll, 1 << 20, 1, costs),
            step_cost(StepKind::kCollective, 1 << 20, 1, costs));
  EXPECT_LT(step_cost(StepKind::kLocalCopy, 1 << 20, 0, costs),
            step_cost(StepKind::kCollective, 1 << 20, 3, costs));
}

}  // namespace
}  // namespace dtensor
