// Copyright 2026 The dtensor Authors.
//
// The expert-parallel MoE layer of examples/moe on 4 ranks of the local
// backend: every step of training (loss, every gradient, every weight after
// the update) equals the same layer on one device in float64 (1e-9), with
// the collectives a hand-written expert-parallel step has; routings where an
// expert, or a whole rank, receives no tokens from some rank train alike.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include <dtensor/mesh/local_communicator.h>
#include "examples/moe/moe.h"

namespace dtensor::examples {
namespace {

constexpr int kRanks = 4;
constexpr double kTolerance = 1e-9;

// Every rank's steps, by rank.
std::vector<std::vector<MoeStep>> train_on_ranks(const MoeTrainOptions& options) {
  std::vector<std::vector<MoeStep>> steps(kRanks);
  run_ranks(kRanks, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"ep"});
    steps[rank] = train_moe(mesh, options);
  });
  return steps;
}

void expect_equal_to_one_device(const std::vector<std::vector<MoeStep>>& steps,
                                int64_t expected_steps) {
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_EQ(static_cast<int64_t>(steps[rank].size()), expected_steps);
    for (size_t s = 0; s < steps[rank].size(); ++s) {
      SCOPED_TRACE("rank " + std::to_string(rank) + " step " + std::to_string(s));
      const MoeStep& step = steps[rank][s];
      EXPECT_NEAR(step.loss, step.reference_loss, kTolerance);
      EXPECT_LE(step.max_grad_diff, kTolerance);
      EXPECT_LE(step.max_param_diff, kTolerance);
      // Per step: the per-expert counts (all_to_all), dispatch and combine
      // each way (all_to_all_v), the loss's sum and the router's gradient
      // (all_reduce); nothing else.
      const std::map<std::string, int64_t> expected = {
          {"all_reduce", 2}, {"all_to_all", 1}, {"all_to_all_v", 4}};
      EXPECT_EQ(step.collectives, expected);
    }
  }
}

// The rows rank `rank` received in `step`, over all sources and experts.
int64_t received_total(const MoeStep& step) {
  int64_t total = 0;
  for (int64_t count : step.received) total += count;
  return total;
}

// The rows received over the ranks in each step are the global batch's
// tokens times top_k: every routed (token, expert) pair is computed once.
void expect_every_pair_computed_once(const std::vector<std::vector<MoeStep>>& steps,
                                     const MoeTrainOptions& options) {
  for (int64_t s = 0; s < options.steps; ++s) {
    int64_t rows = 0;
    for (int rank = 0; rank < kRanks; ++rank) rows += received_total(steps[rank][s]);
    EXPECT_EQ(rows, kRanks * options.tokens_per_rank * options.config.top_k) << "step " << s;
  }
}

TEST(MoeTest, TrainsLikeOneDevice) {
  MoeTrainOptions options;
  options.steps = 4;
  const auto steps = train_on_ranks(options);
  expect_equal_to_one_device(steps, options.steps);
  for (int rank = 0; rank < kRanks; ++rank) {
    // Every rank sees the same global loss, and SGD lowers it.
    for (size_t s = 0; s < steps[rank].size(); ++s) {
      EXPECT_EQ(steps[rank][s].loss, steps[0][s].loss);
    }
  }
  // Fresh data each step, so not monotone; over 4 steps it falls.
  EXPECT_LT(steps[0].back().reference_loss, steps[0].front().reference_loss);
  expect_every_pair_computed_once(steps, options);
}

// One token per rank, top-1 over 4 experts, one per rank: the 4 tokens
// leave at least 12 of each step's 16 (rank, source) counts 0, and with
// this seed some rank receives no row at all in some step (every
// all_to_all_v count 0); the steps still equal one device.
TEST(MoeTest, UnevenRoutingWithEmptyExpertsAndRanks) {
  MoeTrainOptions options;
  options.config.num_experts = 4;
  options.config.top_k = 1;
  options.tokens_per_rank = 1;
  options.steps = 3;
  const auto steps = train_on_ranks(options);
  expect_equal_to_one_device(steps, options.steps);
  expect_every_pair_computed_once(steps, options);
  int64_t ranks_receiving_nothing = 0;
  for (int rank = 0; rank < kRanks; ++rank) {
    for (const MoeStep& step : steps[rank]) {
      ASSERT_EQ(step.received.size(), static_cast<size_t>(kRanks));  // one expert per rank
      ranks_receiving_nothing += received_total(step) == 0 ? 1 : 0;
    }
  }
  EXPECT_GT(ranks_receiving_nothing, 0);
}

}  // namespace
}  // namespace dtensor::examples
