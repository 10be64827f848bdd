// Copyright 2026 The dtensor Authors.
#include "dtensor/debug/rule_verifier.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/library.h>

#include "mesh/local_communicator.h"
#include "placements/placements.h"
#include "rules/pointwise.h"
#include "rules/registry.h"

namespace dtensor {
namespace {

// A custom op with no built-in rule: doubles its input.
at::Tensor double_it(const at::Tensor& x) { return x * 2; }

TORCH_LIBRARY(dtensor_verifier_test, m) { m.def("double_it(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(dtensor_verifier_test, CPU, m) { m.impl("double_it", double_it); }

// The classic wrong rule: doubling a replicated value on every rank does not
// make the ranks hold terms of a sum (the sum would be n times too big).
OpRule planted_wrong_rule() {
  OpRule rule;
  rule.strategy = [](const OpCall& call, int64_t m) {
    return std::vector<ShardingRow>{{{Replicate::make()}, {Partial::make(ReduceOp::kSum)}}};
  };
  rule.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{call.input(0).spec->shape()};
  };
  return rule;
}

SampleCall double_it_sample() {
  return {"dtensor_verifier_test::double_it",
          {at::arange(30, at::kFloat).reshape({5, 6})}};
}

TEST(RuleVerifierTest, BuiltinRulesAreRight) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    int64_t rows = 0;
    for (const SampleCall& sample : builtin_samples()) {
      const VerifierReport report = verify_rules(mesh, sample);
      rows += report.rows_checked;
      for (const std::string& failure : report.failures) ADD_FAILURE() << failure;
    }
    EXPECT_GT(rows, 200);
  });
}

TEST(RuleVerifierTest, CatchesAPlantedWrongRule) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    if (rank == 0) {
      RuleRegistry::global().add("dtensor_verifier_test::double_it",
                                 pointwise_rule(Linearity::kMultiplicative));
    }
    mesh.world()->barrier();
    const VerifierReport right = verify_rules(mesh, double_it_sample());
    EXPECT_GT(right.rows_checked, 3);
    EXPECT_TRUE(right.failures.empty()) << right.failures.front();
    mesh.world()->barrier();
    if (rank == 0) RuleRegistry::global().add("dtensor_verifier_test::double_it", planted_wrong_rule());
    mesh.world()->barrier();
    const VerifierReport wrong = verify_rules(mesh, double_it_sample());
    ASSERT_EQ(wrong.failures.size(), 1u);
    EXPECT_NE(wrong.failures[0].find("[R] -> [P(sum)]: output 0 differs"), std::string::npos)
        << wrong.failures[0];
    mesh.world()->barrier();
    if (rank == 0) RuleRegistry::global().clear("dtensor_verifier_test::double_it");
  });
}

}  // namespace
}  // namespace dtensor
