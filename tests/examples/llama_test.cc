// Copyright 2026 The dtensor Authors.
//
// The Llama-style model of examples/llama trains under each plan exactly as
// on one device (float64: every loss, gradient and updated parameter within
// 1e-9), with no op on the replicate fallback and no implicit replication.
#include <gtest/gtest.h>

#include <absl/strings/str_join.h>

#include <dtensor/dispatch/fallback_recorder.h>
#include <dtensor/mesh/local_communicator.h>
#include "examples/llama/llama_parallel.h"
#include "tests/support/expect_error.h"

namespace dtensor::examples {
namespace {

struct PlanCase {
  LlamaPlan plan;
  std::vector<int64_t> mesh;
  bool adamw_with_clipping = false;
  int64_t kv_heads = 4;  // 2: grouped-query attention, two query heads per key/value head
};

class LlamaTest : public ::testing::TestWithParam<PlanCase> {};

TEST_P(LlamaTest, TrainsLikeOneDevice) {
  const PlanCase& c = GetParam();
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh(
        "local", c.mesh,
        c.mesh.size() == 1 ? std::vector<std::string>{"tp"} : std::vector<std::string>{"dp", "tp"});
    FallbackRecorder fallbacks;
    LlamaTrainOptions options;
    options.config.kv_heads = c.kv_heads;
    if (c.adamw_with_clipping) {
      options.adamw = true;
      options.learning_rate = 0.01;
      options.clip_norm = 0.5;  // below every step's norm: every step clips
    }
    const std::vector<LlamaStep> steps = train_llama(mesh, c.plan, options);
    ASSERT_EQ(steps.size(), 3u);
    for (const LlamaStep& step : steps) {
      EXPECT_NEAR(step.loss, step.reference_loss, 1e-9);
      EXPECT_LE(step.max_grad_diff, 1e-9);
      EXPECT_LE(step.max_param_diff, 1e-9);
      EXPECT_NEAR(step.grad_norm, step.reference_grad_norm, 1e-9);
      if (c.adamw_with_clipping) {
        EXPECT_GT(step.reference_grad_norm, options.clip_norm);
      }
    }
    // The loss falls: the steps train.
    EXPECT_LT(steps.back().reference_loss, steps.front().reference_loss);
    EXPECT_TRUE(fallbacks.ops().empty()) << absl::StrJoin(fallbacks.ops(), ", ");
  });
}

INSTANTIATE_TEST_SUITE_P(Plans, LlamaTest,
                         ::testing::Values(PlanCase{LlamaPlan::kTensorParallel, {4}},
                                           PlanCase{LlamaPlan::kLossParallel, {4}},
                                           PlanCase{LlamaPlan::kTensorParallel, {2, 2}},
                                           PlanCase{LlamaPlan::kLossParallel, {2, 2}},
                                           PlanCase{LlamaPlan::kTensorParallel, {4}, true},
                                           PlanCase{LlamaPlan::kLossParallel, {2, 2}, true},
                                           PlanCase{LlamaPlan::kTensorParallel, {2, 2}, false, 2}));

TEST(LlamaPlanTest, HeadsMustDivideByTheTensorParallelDegree) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"tp"});
    LlamaConfig config;
    config.heads = 6;
    config.kv_heads = 6;
    config.dim = 18;
    Llama model(config);
    DTENSOR_EXPECT_ERROR(parallelize_llama(model, mesh, LlamaPlan::kTensorParallel),
                         "parallelize_llama: expected the heads (6) and key/value heads (6) to "
                         "divide by the tp degree (4)");
  });
}

}  // namespace
}  // namespace dtensor::examples
