// Copyright 2026 The dtensor Authors.
//
// Views on a 2-D mesh that unflatten a dim two mesh dims split: the
// [B*H, ...] <-> [B, H, ...] reshapes of attention with the batch over one
// mesh dim and the heads over the other. Merging gives [S(0), SS(0,k)];
// viewing back must find [S(0), S(1)] again with no collective and exact
// values (rules/dim_map.cc, regrouped_split under an earlier split).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <dtensor/dispatch/dispatch.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/rules/rules_test_util.h"

namespace dtensor {
namespace {

using rules_testing::dist;
using rules_testing::iota;
using rules_testing::placements_of;
using rules_testing::Shape;

struct Case {
  Shape shape;   // [B, H, rest...], laid out [S(0), S(1)]
  Shape merged;  // [B * H, rest...]
  const char* merged_layout;
};

// [4,4,8,8]: each dp rank holds 2 of the 4 batches, each tp rank 2 of the 4
// heads of each: in the merged dim, blocks of 4 of which a tp rank holds 2,
// twice: SS(0,2). [4,6,5]: 3 of 6 heads per tp rank. [2,4,3]: one batch per
// dp rank, so the tp split of its heads is a plain Shard of the merged dim.
const Case kCases[] = {{{4, 4, 8, 8}, {16, 8, 8}, "S(0),SS(0,2)"},
                       {{4, 6, 5}, {24, 5}, "S(0),SS(0,2)"},
                       {{2, 4, 3}, {8, 3}, "S(0),S(0)"}};

TEST(View2DTest, UnflatteningTheMergeOfTwoMeshSplitsKeepsBothWithoutCollectives) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    for (const Case& c : kCases) {
      SCOPED_TRACE(::testing::PrintToString(c.shape));
      const at::Tensor global = iota(c.shape, 1, at::kDouble);
      const DTensor laid_out = dist(global, mesh, "S(0),S(1)");
      at::Tensor merged, back, reshaped_back;
      {
        // Strict: any input that must move raises instead.
        const ScopedStrictMode strict;
        CollectiveCounter counter;
        merged = laid_out.tensor().reshape(c.merged);
        back = merged.view(c.shape);
        reshaped_back = merged.reshape(c.shape);
        EXPECT_EQ(counter.total(), 0);
      }
      EXPECT_EQ(placements_of(merged), c.merged_layout);
      EXPECT_DT(merged, global.reshape(c.merged), c.merged_layout);
      EXPECT_DT(back, global, "S(0),S(1)");
      EXPECT_DT(reshaped_back, global, "S(0),S(1)");
      // Each rank's shard is the one it started with.
      EXPECT_TRUE(at::equal(DTensor(back).to_local(), laid_out.to_local()));
    }
  });
}

// The merged layout made directly (not by a reshape) unflattens alike.
TEST(View2DTest, StridedShardUnderAnEarlierSplitUnflattensToAShard) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    const at::Tensor global = iota({4, 4, 8, 8}, 1, at::kDouble);
    const DTensor merged = dist(global.reshape({16, 8, 8}), mesh, "S(0),SS(0,2)");
    at::Tensor back;
    {
      const ScopedStrictMode strict;
      CollectiveCounter counter;
      back = merged.tensor().view({4, 4, 8, 8});
      EXPECT_EQ(counter.total(), 0);
    }
    EXPECT_DT(back, global, "S(0),S(1)");
    EXPECT_TRUE(at::equal(DTensor(back).to_local(), dist(global, mesh, "S(0),S(1)").to_local()));
  });
}

// The round trip is differentiable without communication either: the
// gradient comes back in the input's layout with the exact values.
TEST(View2DTest, RoundTripGradientKeepsTheLayout) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    const at::Tensor global = iota({4, 4, 8, 8}, 1, at::kDouble);
    const at::Tensor weights = iota({4, 4, 8, 8}, -300, at::kDouble);
    const DTensor x = dist(global.clone().requires_grad_(), mesh, "S(0),S(1)");
    const at::Tensor w = dist(weights, mesh, "S(0),S(1)").tensor();
    const at::Tensor loss = (x.tensor().reshape({16, 8, 8}).view({4, 4, 8, 8}) * w).sum();
    CollectiveCounter counter;
    loss.backward();
    EXPECT_EQ(counter.total(), 0);
    EXPECT_DT(x.tensor().grad(), weights, "S(0),S(1)");
  });
}

}  // namespace
}  // namespace dtensor
