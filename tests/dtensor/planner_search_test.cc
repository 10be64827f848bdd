// Copyright 2026 The dtensor Authors.
//
// The planner's search (dtensor/redistribute/planner.h): with its A* bound
// (a collective's latency per sharded or partial mesh dim still to change)
// it finds plans exactly as cheap as the plain shortest-path search, and a
// registered transition that may make such a change without communicating
// turns the bound off, so the search still finds the cheapest plan.
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <dtensor/base/check.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/placements/spec.h>
#include <dtensor/redistribute/planner.h>
#include <dtensor/redistribute/transition.h>

namespace dtensor {
namespace {

using Shape = std::vector<int64_t>;

// A local transition the planner may pick but never runs: the search's
// answer, not data, is under test.
class PlanOnlyLocal : public Transition {
 public:
  std::string_view collective() const override { return "local"; }
  int64_t bytes(const StepContext&) const override { return 0; }
  at::Tensor run(const at::Tensor& local, const StepContext&) const override {
    DTENSOR_CHECK(false, "planner_search_test: a plan-only transition ran");
    return local;
  }
};

// Applies to nothing, but does not say it never changes a sharded placement
// locally (the default): its registration alone turns the bound off.
class NeverApplies final : public PlanOnlyLocal {
 public:
  bool applies(const StepContext&) const override { return false; }
};

// S -> R "without communicating": a cheap local step the bound would
// wrongly price at a collective's latency.
class FreeGather final : public PlanOnlyLocal {
 public:
  bool applies(const StepContext& step) const override {
    return step.source_placement().kind() == "S" && step.target_placement().is_replicate();
  }
};

// Registers `transition` under `key` for the scope (plans made before are
// dropped: the registry's generation changes).
class ScopedTransition {
 public:
  ScopedTransition(std::string key, std::shared_ptr<const Transition> transition)
      : key_(std::move(key)) {
    transitions().add(key_, std::move(transition));
  }
  ~ScopedTransition() { transitions().remove(key_); }
  ScopedTransition(const ScopedTransition&) = delete;
  ScopedTransition& operator=(const ScopedTransition&) = delete;

 private:
  std::string key_;
};

struct PlacementPair {
  std::string source, target;
};

// `count` random pairs of placements for a mesh of `mesh_ndim` dims and a
// 3-D tensor: Shard, StridedShard, Partial (sums and maxima) and Replicate,
// targets included (the planner takes Partial targets).
std::vector<PlacementPair> random_pairs(int64_t mesh_ndim, int count, uint32_t seed) {
  static const std::vector<std::string> kinds = {"R",       "S(0)",   "S(1)",  "S(2)",
                                                 "SS(0,2)", "P(sum)", "P(max)"};
  std::mt19937 gen(seed);
  std::uniform_int_distribution<size_t> pick(0, kinds.size() - 1);
  auto draw = [&] {
    std::string placements;
    for (int64_t m = 0; m < mesh_ndim; ++m) placements += (m ? "," : "") + kinds[pick(gen)];
    return placements;
  };
  std::vector<PlacementPair> pairs;
  for (int i = 0; i < count; ++i) pairs.push_back({draw(), draw()});
  return pairs;
}

// Every pair's plan cost on `mesh_shape` (one entry per pair, -1 where no
// plan exists), as rank 0 plans it (every rank plans, as in a redistribute).
std::vector<double> plan_costs(const Shape& mesh_shape, const std::vector<PlacementPair>& pairs) {
  int64_t ranks = 1;
  for (int64_t extent : mesh_shape) ranks *= extent;
  std::vector<double> costs;
  run_ranks(static_cast<int>(ranks), [&](int rank) {
    const DeviceMesh mesh(local_world(), mesh_shape);
    for (const PlacementPair& pair : pairs) {
      double cost = -1;
      try {
        const DTensorSpec source(mesh, parse_placements(pair.source), Shape{8, 6, 4}, at::kFloat);
        cost = plan_redistribute(source, parse_placements(pair.target))->total_cost;
      } catch (const Error&) {
      }
      if (rank == 0) costs.push_back(cost);
    }
  });
  return costs;
}

TEST(PlannerSearchTest, BoundedSearchFindsPlansAsCheapAsThePlainSearch) {
  for (const Shape& mesh_shape : {Shape{2, 2, 2}, Shape{2, 1, 2}, Shape{2, 2, 2, 2}}) {
    const std::vector<PlacementPair> pairs =
        random_pairs(static_cast<int64_t>(mesh_shape.size()), 150, 17);
    const std::vector<double> bounded = plan_costs(mesh_shape, pairs);
    std::vector<double> plain;
    {
      const ScopedTransition unbounded("R->R", std::make_shared<NeverApplies>());
      plain = plan_costs(mesh_shape, pairs);
    }
    ASSERT_EQ(bounded.size(), pairs.size());
    ASSERT_EQ(plain.size(), pairs.size());
    int64_t planned = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      // Ties may pick another plan of the same cost, summed in another order.
      EXPECT_NEAR(bounded[i], plain[i], 1e-9 * std::max(1.0, plain[i]))
          << pairs[i].source << " -> " << pairs[i].target << " on mesh of " << mesh_shape.size()
          << " dims";
      planned += plain[i] >= 0 ? 1 : 0;
    }
    EXPECT_GT(planned, 100);  // most pairs have a plan: the comparison means something
  }
}

// With a local S -> R step registered, gathering three sharded mesh dims
// costs three local steps; a search still bounding by collective latencies
// would stop at the one exchange that reaches R,R,R at once.
TEST(PlannerSearchTest, ALocalStepFromAShardTurnsTheBoundOff) {
  const std::vector<PlacementPair> pair = {{"S(0),S(1),S(2)", "R,R,R"}};
  const double with_collectives = plan_costs({2, 2, 2}, pair)[0];
  const ScopedTransition free_gather("S->R", std::make_shared<FreeGather>());
  const double local_steps = plan_costs({2, 2, 2}, pair)[0];
  const CollectiveCosts costs;  // the local backend's model: the defaults
  EXPECT_DOUBLE_EQ(local_steps, 3 * costs.local_step_us);
  EXPECT_GT(with_collectives, costs.latency_us);
}

}  // namespace
}  // namespace dtensor
