// Copyright 2026 The dtensor Authors.
//
// The extension points that are registries (base/registry.h) beyond the
// rules' own: transitions by placement pair, placement parsers by name,
// parallel styles by name; and the operator names they are keyed by.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include <dtensor/base/op_name.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/nn/parallel_style.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/planner.h>
#include <dtensor/redistribute/transition.h>
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using Strings = std::vector<std::string>;

// A fast path a plugin could register for one pair of kinds: counts its runs
// and gathers through the built-in transition.
class CountingGather final : public Transition {
 public:
  explicit CountingGather(std::shared_ptr<const Transition> gather) : gather_(std::move(gather)) {}
  std::string_view collective() const override { return "all_gather_v"; }
  int priority() const override { return -50; }
  bool applies(const StepContext& step) const override { return gather_->applies(step); }
  int64_t bytes(const StepContext& step) const override { return gather_->bytes(step); }
  at::Tensor run(const at::Tensor& local, const StepContext& step) const override {
    ++runs;
    return gather_->run(local, step);
  }
  mutable std::atomic<int> runs{0};

 private:
  std::shared_ptr<const Transition> gather_;
};

// The built-in gather, registered for any split to Replicate.
std::shared_ptr<const Transition> builtin_gather() {
  for (const auto& transition : *transitions().find("*->R")) {
    if (transition->collective() == "all_gather_v") return transition;
  }
  return nullptr;
}

TEST(TransitionRegistryTest, APairsTransitionServesThatPairOnly) {
  const auto counting = std::make_shared<CountingGather>(builtin_gather());
  const at::Tensor a = at::arange(42, at::kFloat).reshape({7, 6});
  auto gather_from = [&](const char* layout) {
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      const DTensor d = distribute_tensor(a, mesh, parse_placements(layout));
      EXPECT_TRUE(at::equal(d.full_tensor(), a)) << layout;
    });
  };
  gather_from("S(0)");  // a plan made (and cached) before the registration
  transitions().add("S->R", counting);
  gather_from("S(0)");
  gather_from("S(1)");
  EXPECT_EQ(counting->runs.load(), 8);  // the cached plan was dropped
  gather_from("SS(0,2)");               // kind "SS": not this pair's
  EXPECT_EQ(counting->runs.load(), 8);
  transitions().remove("S->R");
  gather_from("S(0)");
  EXPECT_EQ(counting->runs.load(), 8);
}

TEST(TransitionRegistryTest, KeysArePlacementPairs) {
  EXPECT_NE(transitions().find("*->*"), nullptr);
  for (const char* bad : {"S-R", "->R", "S->", "S->R->P"}) {
    DTENSOR_EXPECT_ERROR(transitions().add(bad, builtin_gather()),
                         "transition registry: expected a placement pair like \"S->R\"");
  }
}

TEST(PlacementRegistryTest, KindsAreTheirSpellings) {
  EXPECT_EQ(Replicate::make()->kind(), "R");
  EXPECT_EQ(Shard::make(1)->kind(), "S");
  EXPECT_EQ(Partial::make(ReduceOp::kMax)->kind(), "P");
  EXPECT_EQ(StridedShard::make(0, 2)->kind(), "SS");
  EXPECT_EQ(Ragged::make(1, {1, 2})->kind(), "RG");
}

TEST(PlacementRegistryTest, ParsersByName) {
  const Strings names = placement_parsers().keys();
  for (const char* name : {"P", "R", "RG", "S", "SS"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  DTENSOR_EXPECT_ERROR(placement_parsers().add("S", nullptr),
                       "placement parser registry: \"S\": expected one value per key");
  DTENSOR_EXPECT_ERROR(placement_parsers().add("1S", nullptr),
                       "placement parser registry: expected a name like \"S\" or \"IS\", found "
                       "\"1S\"");
  DTENSOR_EXPECT_ERROR(parse_placement("Q(0)"), "a known placement (P, R, RG, S, SS");
}

TEST(ParallelStyleRegistryTest, StylesByName) {
  nn::StyleOptions options;
  options.use_local_output = false;
  EXPECT_EQ(nn::parallel_style("ColwiseParallel", options)->name(), "ColwiseParallel");
  EXPECT_EQ(nn::parallel_style("RowwiseParallel")->name(), "RowwiseParallel");
  EXPECT_EQ(nn::parallel_style("SequenceParallel")->name(), "SequenceParallel");
  options.desired_input_layouts = Replicate::make();
  EXPECT_EQ(nn::parallel_style("PrepareModuleInput", options)->name(), "PrepareModuleInput");
  DTENSOR_EXPECT_ERROR(nn::parallel_style("ExpertParallel"),
                       "parallel_style: expected a registered style (ColwiseParallel, "
                       "PrepareModuleInput, PrepareModuleOutput, RowwiseParallel, "
                       "SequenceParallel), found \"ExpertParallel\"");
}

TEST(OpNameTest, ParsesAndFormatsOperatorNames) {
  const c10::OperatorName add = parse_op_name("aten::add.Tensor");
  EXPECT_EQ(add.name, "aten::add");
  EXPECT_EQ(add.overload_name, "Tensor");
  EXPECT_EQ(op_name_string(add), "aten::add.Tensor");
  const c10::OperatorName relu = parse_op_name("aten::relu");
  EXPECT_EQ(relu.overload_name, "");
  EXPECT_EQ(op_name_string(relu), "aten::relu");
  for (const char* bad : {"add", "aten::", "::add", "aten::add.", "aten::.Tensor", "a::b::c",
                          "a.b::c", "aten:::relu", "aten::a..b", "aten::relu "}) {
    DTENSOR_EXPECT_ERROR(parse_op_name(bad, "test"),
                         "test: expected an operator name like \"aten::add.Tensor\", found \"" +
                             std::string(bad) + "\"");
  }
  EXPECT_TRUE(operator_exists("aten::add.Tensor"));
  EXPECT_FALSE(operator_exists("aten::add.NoSuchOverload"));
}

}  // namespace
}  // namespace dtensor
