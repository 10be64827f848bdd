// Copyright 2026 The dtensor Authors.
//
// Autograd through DTensors: tensor-parallel MLP training equals one-device
// training (examples/tp_mlp), and the layout calls carry gradients.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "dtensor/dtensor.h"
#include "examples/tp_mlp/tp_mlp.h"
#include "mesh/local_communicator.h"
#include "placements/placements.h"
#include "tests/support/tp_mlp_expectations.h"

namespace dtensor {
namespace {

void expect_matches_one_device(bool sequence_parallel) {
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    examples::TpMlpOptions options;
    options.sequence_parallel = sequence_parallel;
    options.batch = 7;  // uneven over 4 ranks in the sequence-parallel variant
    testing::expect_trains_like_one_device(examples::train_tp_mlp(mesh, options), 4);
  });
}

TEST(AutogradTest, TensorParallelMlpMatchesOneDevice) { expect_matches_one_device(false); }

TEST(AutogradTest, SequenceParallelMlpMatchesOneDevice) { expect_matches_one_device(true); }

TEST(AutogradTest, RedistributeBackwardReturnsToSourceLayout) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = at::arange(10, at::kFloat).reshape({5, 2});
    DTensor x = distribute_tensor(global.clone().requires_grad_(), mesh, parse_placements("S(0)"));
    DTensor r = x.redistribute(parse_placements("R"));
    at::Tensor local = r.to_local();
    (local * local).sum().backward();  // d/dx sum(x^2) = 2x on every rank's full copy
    DTensor grad(x.tensor().grad());
    EXPECT_EQ(placements_to_string(grad.placements()), "S(0)");
    EXPECT_TRUE(at::equal(grad.full_tensor(), global * 2));
  });
}

TEST(AutogradTest, FromLocalAndToLocalCarryGradients) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor local = at::full({2, 3}, rank + 1.0).requires_grad_();
    DTensor d = from_local(local, mesh, parse_placements("S(0)"));
    DTensor doubled(d.tensor() * 2);
    doubled.to_local().sum().backward();
    EXPECT_TRUE(at::equal(local.grad(), at::full({2, 3}, 2.0)));
  });
}

}  // namespace
}  // namespace dtensor
