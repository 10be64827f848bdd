// Copyright 2026 The dtensor Authors.
//
// The planner's search (dtensor/redistribute/planner.h): with its A* bound
// (a collective's latency per distinct placement that does not replicate
// still to change) it finds plans exactly as cheap as the plain
// shortest-path search while expanding fewer states, and a registered
// transition that may make such a change without communicating turns the
// bound off, so the search still finds the cheapest plan.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
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

// Registers `transition` under `key` for the scope; then the key holds what
// it held before again. Plans made before are dropped either way (the
// registry's generation changes).
class ScopedTransition {
 public:
  ScopedTransition(std::string key, std::shared_ptr<const Transition> transition)
      : key_(std::move(key)), before_(transitions().find(key_)) {
    transitions().add(key_, std::move(transition));
  }
  ~ScopedTransition() {
    transitions().remove(key_);
    if (before_ == nullptr) return;
    for (const std::shared_ptr<const Transition>& transition : *before_) {
      transitions().add(key_, transition);
    }
  }
  ScopedTransition(const ScopedTransition&) = delete;
  ScopedTransition& operator=(const ScopedTransition&) = delete;

 private:
  std::string key_;
  std::shared_ptr<const std::vector<std::shared_ptr<const Transition>>> before_;
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

// What rank 0's plan of a pair costs and how many states its search
// expanded; cost -1 where no plan exists.
struct Planned {
  double cost = -1;
  int64_t states_expanded = 0;
};

// Every pair's plan on `mesh_shape` for a float tensor of `shape`, as rank 0
// plans it (every rank plans, as in a redistribute).
std::vector<Planned> plan_all(const Shape& mesh_shape, const Shape& shape,
                              const std::vector<PlacementPair>& pairs) {
  int64_t ranks = 1;
  for (int64_t extent : mesh_shape) ranks *= extent;
  std::vector<Planned> planned;
  run_ranks(static_cast<int>(ranks), [&](int rank) {
    const DeviceMesh mesh(local_world(), mesh_shape);
    for (const PlacementPair& pair : pairs) {
      Planned one;
      try {
        const DTensorSpec source(mesh, parse_placements(pair.source), shape, at::kFloat);
        const RedistributePlanPtr plan = plan_redistribute(source, parse_placements(pair.target));
        one = {plan->total_cost, plan->states_expanded};
      } catch (const Error&) {
      }
      if (rank == 0) planned.push_back(one);
    }
  });
  return planned;
}

// The local backend's cost model, as a mesh of it reads it.
CollectiveCosts local_costs() {
  CollectiveCosts costs;
  run_ranks(1, [&](int) { costs = DeviceMesh(local_world(), {1}).collective_costs(); });
  return costs;
}

// Registered under "*->*", a key every step's lookup reads.
std::unique_ptr<ScopedTransition> unbounded_search() {
  return std::make_unique<ScopedTransition>("*->*", std::make_shared<NeverApplies>());
}

TEST(PlannerSearchTest, BoundedSearchFindsPlansAsCheapAsThePlainSearch) {
  struct Setting {
    Shape mesh, tensor;
  };
  // Small tensors, where latency decides, and larger ones, where bytes do.
  for (const Setting& setting : {Setting{{2, 2, 2}, {8, 6, 4}}, Setting{{2, 2, 2}, {96, 64, 40}},
                                 Setting{{2, 1, 2}, {8, 6, 4}}, Setting{{2, 2, 2, 2}, {8, 6, 4}},
                                 Setting{{2, 2, 2, 2}, {64, 48, 32}}}) {
    const std::vector<PlacementPair> pairs =
        random_pairs(static_cast<int64_t>(setting.mesh.size()), 100, 17);
    const std::vector<Planned> bounded = plan_all(setting.mesh, setting.tensor, pairs);
    std::vector<Planned> plain;
    {
      const auto unbounded = unbounded_search();
      plain = plan_all(setting.mesh, setting.tensor, pairs);
    }
    ASSERT_EQ(bounded.size(), pairs.size());
    ASSERT_EQ(plain.size(), pairs.size());
    int64_t planned = 0, expanded_bounded = 0, expanded_plain = 0;
    for (size_t i = 0; i < pairs.size(); ++i) {
      // Ties may pick another plan of the same cost, summed in another order.
      EXPECT_NEAR(bounded[i].cost, plain[i].cost, 1e-9 * std::max(1.0, plain[i].cost))
          << pairs[i].source << " -> " << pairs[i].target << " on a mesh of " << setting.mesh.size()
          << " dims";
      planned += plain[i].cost >= 0 ? 1 : 0;
      expanded_bounded += bounded[i].states_expanded;
      expanded_plain += plain[i].states_expanded;
    }
    EXPECT_GT(planned, 60);  // most pairs have a plan: the comparison means something
    EXPECT_LT(expanded_bounded, expanded_plain);  // the bound was on, then off
  }
}

// Plans of several collectives through states the bound prices: the same
// cost, fewer states expanded.
TEST(PlannerSearchTest, BoundedSearchExpandsFewerStatesOnMultiStepPlans) {
  const std::vector<PlacementPair> pairs = {
      {"S(0),S(1),S(2),S(3)", "S(3),S(2),S(1),S(0)"},
      {"SS(0,2),S(0),R,S(1)", "R,S(1),S(0),S(2)"},
  };
  const Shape shape = {64, 48, 32, 16};
  const std::vector<Planned> bounded = plan_all({2, 2, 2, 2}, shape, pairs);
  const auto unbounded = unbounded_search();
  const std::vector<Planned> plain = plan_all({2, 2, 2, 2}, shape, pairs);
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_NEAR(bounded[i].cost, plain[i].cost, 1e-9 * plain[i].cost) << pairs[i].source;
    EXPECT_LT(bounded[i].states_expanded, plain[i].states_expanded) << pairs[i].source;
  }
}

// With a local S -> R step registered, gathering three sharded mesh dims
// costs three local steps; a search still bounding by collective latencies
// would stop at the one exchange that reaches R,R,R at once.
TEST(PlannerSearchTest, ALocalStepFromAShardTurnsTheBoundOff) {
  const std::vector<PlacementPair> pair = {{"S(0),S(1),S(2)", "R,R,R"}};
  const CollectiveCosts costs = local_costs();
  EXPECT_GT(plan_all({2, 2, 2}, {8, 6, 4}, pair)[0].cost, costs.latency_us);
  const ScopedTransition free_gather("S->R", std::make_shared<FreeGather>());
  EXPECT_DOUBLE_EQ(plan_all({2, 2, 2}, {8, 6, 4}, pair)[0].cost, 3 * costs.local_step_us);
}

}  // namespace
}  // namespace dtensor
