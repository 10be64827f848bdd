// Copyright 2026 The dtensor Authors.
#include <dtensor/tools/rule_verifier.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/library.h>

#include <set>

#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/rules/decomposition.h>
#include <dtensor/rules/pointwise.h>
#include <dtensor/rules/strategy.h>

namespace dtensor {
namespace {

// A custom op with no built-in rule: doubles its input.
at::Tensor double_it(const at::Tensor& x) { return x * 2; }

TORCH_LIBRARY(dtensor_verifier_test, m) { m.def("double_it(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(dtensor_verifier_test, CPU, m) { m.impl("double_it", double_it); }

// A decomposition that computes something else: x * 3.
void planted_wrong_decomposition(const c10::OperatorHandle&, torch::jit::Stack& stack) {
  const at::Tensor x = stack.back().toTensor();
  stack.clear();
  stack.emplace_back(x * 3);
}

// The classic wrong rule: doubling a replicated value on every rank does not
// make the ranks hold terms of a sum (the sum would be n times too big).
Strategy planted_wrong_strategy() {
  Strategy strategy;
  strategy.rows = [](const OpCall&, int64_t) {
    return std::vector<ShardingRow>{{{Replicate::make()}, {Partial::make(ReduceOp::kSum)}}};
  };
  strategy.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{call.input(0).spec->shape()};
  };
  return strategy;
}

SampleCall double_it_sample() {
  return {"dtensor_verifier_test::double_it", {at::arange(30, at::kFloat).reshape({5, 6})}};
}

// Every row of every registered rule, on written and schema-made samples.
TEST(RuleVerifierTest, EveryRegisteredRuleIsRight) {
  const std::vector<SampleCall> samples = all_samples();
  run_ranks(4, [&](int /*rank*/) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    for (const SampleCall& sample : samples) {
      const VerifierReport report = verify_rules(mesh, sample);
      for (const std::string& failure : report.failures) ADD_FAILURE() << failure;
      // A sample none of whose rows ran would pass without checking
      // anything, unless it is a `_foreach_*` op whose element op has no
      // rule: then every layout is refused, naming that op.
      if (report.rows_checked > 0) continue;
      EXPECT_FALSE(report.refusals.empty()) << sample.op_name << " checked nothing";
      for (const std::string& refusal : report.refusals) {
        EXPECT_NE(refusal.find("no sharding rule for aten::"), std::string::npos)
            << sample.op_name << ": " << refusal;
      }
    }
  });
}

// Every op with a rule that this libtorch runs on the CPU gets a sample: from
// its schema, or written in builtin_samples.cc where schema-made arguments
// do not run (1.13, 2.6 and 2.14 need none beyond those written).
TEST(RuleVerifierTest, EveryRegisteredOpHasASample) {
  std::vector<std::string> unsampled;
  const std::vector<SampleCall> samples = all_samples(&unsampled);
  EXPECT_EQ(unsampled, std::vector<std::string>{});
  std::set<std::string> sampled;
  for (const SampleCall& sample : samples) sampled.insert(sample.op_name);
  std::vector<std::string> ops = strategies().keys();
  for (const std::string& op : decompositions().keys()) ops.push_back(op);
  for (const std::string& op : ops) {
    if (runs_on_cpu(op)) {
      EXPECT_EQ(sampled.count(op), 1u) << op;
    }
  }
}

TEST(RuleVerifierTest, CatchesAPlantedWrongRule) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    if (rank == 0) {
      strategies().add("dtensor_verifier_test::double_it",
                       pointwise_strategy(Linearity::kMultiplicative));
    }
    mesh.world()->barrier();
    const VerifierReport right = verify_rules(mesh, double_it_sample());
    EXPECT_GT(right.rows_checked, 3);
    EXPECT_TRUE(right.failures.empty()) << right.failures.front();
    mesh.world()->barrier();
    if (rank == 0) strategies().add("dtensor_verifier_test::double_it", planted_wrong_strategy());
    mesh.world()->barrier();
    const VerifierReport wrong = verify_rules(mesh, double_it_sample());
    ASSERT_EQ(wrong.failures.size(), 1u);
    EXPECT_NE(wrong.failures[0].find("[R] -> [P(sum)]: output 0 differs"), std::string::npos)
        << wrong.failures[0];
    mesh.world()->barrier();
    if (rank == 0) strategies().remove("dtensor_verifier_test::double_it");
  });
}

TEST(RuleVerifierTest, CatchesAWrongDecompositionUnderEveryLayout) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    if (rank == 0) {
      decompositions().add("dtensor_verifier_test::double_it", planted_wrong_decomposition);
    }
    mesh.world()->barrier();
    const VerifierReport wrong = verify_rules(mesh, double_it_sample());
    // Layouts: R, P(sum|avg|max|min), S(0), SS(0,2), S(1), SS(1,2), RG: the
    // probes of one input alone and of all inputs alike are the same.
    EXPECT_EQ(wrong.rows_checked, 10);
    EXPECT_EQ(wrong.failures.size(), 10u);
    ASSERT_FALSE(wrong.failures.empty());
    EXPECT_EQ(wrong.failures[0],
              "dtensor_verifier_test::double_it layout [R] (decomposed): output 0 differs");
    mesh.world()->barrier();
    if (rank == 0) decompositions().remove("dtensor_verifier_test::double_it");
  });
}

}  // namespace
}  // namespace dtensor
