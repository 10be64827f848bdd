// Copyright 2026 The dtensor Authors.
//
// tests/support/tp_mlp_expectations.h: what tensor-parallel training of
// examples/tp_mlp must show on every backend: losses, gradients and updated
// parameters equal to one device's, a pending-sum output and a gradient
// sharded like its weight, and a loss that moved.
#pragma once

#include <vector>

#include <gtest/gtest.h>

#include "examples/tp_mlp/tp_mlp.h"

namespace dtensor::testing {

inline void expect_trains_like_one_device(const std::vector<examples::TpMlpStep>& steps,
                                          size_t expected_steps) {
  ASSERT_EQ(steps.size(), expected_steps);
  for (const examples::TpMlpStep& step : steps) {
    EXPECT_NEAR(step.loss, step.reference_loss, 1e-5);
    EXPECT_LT(step.max_grad_diff, 1e-5);
    EXPECT_LT(step.max_param_diff, 1e-5);
    // Row-parallel output is a pending sum; the column-parallel weight's
    // gradient stays sharded like the weight.
    EXPECT_EQ(step.output_placements, "P(sum)");
    EXPECT_EQ(step.weight_grad_placements, "S(0)");
  }
  EXPECT_NE(steps.front().loss, steps.back().loss);  // it did train
}

}  // namespace dtensor::testing
