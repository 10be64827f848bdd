// Copyright 2026 The dtensor Authors.
//
// dtensor::nn::clip_grad_norm_ on gradients laid out every way, mixed with
// plain ones: the total norm and the clipped gradients equal libtorch's on
// one device, with one collective for the norm.
#include <dtensor/nn/clip_grad.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
// clip_grad.h is not self-contained: it needs torch::Tensor declared first.
#include <torch/types.h>

#include <torch/nn/utils/clip_grad.h>

#include <limits>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/support/expect_error.h"

namespace dtensor::nn {
namespace {

// A parameter whose gradient is `grad`.
at::Tensor with_grad(at::Tensor parameter, const at::Tensor& grad) {
  parameter.mutable_grad() = grad;
  return parameter;
}

TEST(ClipGradTest, MixedLayoutsClipLikeOneDevice) {
  const std::vector<at::Tensor> grads = {at::arange(35, at::kDouble).reshape({7, 5}).sin(),
                                         at::arange(6, at::kDouble).cos().mul(3),
                                         at::arange(4, at::kDouble).add(1)};
  const char* layouts[] = {"S(0),S(1)", "R,S(0)", nullptr};  // the last stays plain
  for (const double norm_type : {2.0, 1.0, std::numeric_limits<double>::infinity()}) {
    SCOPED_TRACE(norm_type);
    std::vector<at::Tensor> reference;
    for (const at::Tensor& g : grads) reference.push_back(with_grad(at::zeros_like(g), g.clone()));
    const double expected = torch::nn::utils::clip_grad_norm_(reference, 0.5, norm_type);
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {2, 2});
      std::vector<at::Tensor> parameters;
      for (size_t i = 0; i < grads.size(); ++i) {
        if (layouts[i] == nullptr) {
          parameters.push_back(with_grad(at::zeros_like(grads[i]), grads[i].clone()));
          continue;
        }
        const std::vector<PlacementPtr> placements = parse_placements(layouts[i]);
        parameters.push_back(
            with_grad(distribute_tensor(at::zeros_like(grads[i]), mesh, placements).tensor(),
                      distribute_tensor(grads[i], mesh, placements).tensor()));
      }
      CollectiveCounter counter;
      const double total = clip_grad_norm_(parameters, 0.5, norm_type);
      EXPECT_EQ(counter.total(), 1);
      EXPECT_NEAR(total, expected, 1e-12);
      for (size_t i = 0; i < grads.size(); ++i) {
        const at::Tensor& g = parameters[i].grad();
        const at::Tensor whole = is_dtensor(g) ? DTensor(g).full_tensor() : g;
        EXPECT_TRUE(at::allclose(whole, reference[i].grad(), 1e-12, 1e-12)) << i;
      }
    });
  }
}

// A pending sum is reduced once, before the norm, and the gradient keeps the
// reduced value; a norm type of 0 or less is refused.
TEST(ClipGradTest, PartialGradientsAreReducedOnce) {
  const at::Tensor grad = at::arange(6, at::kDouble).add(1);
  std::vector<at::Tensor> reference = {with_grad(at::zeros_like(grad), grad.clone())};
  const double expected = torch::nn::utils::clip_grad_norm_(reference, 1.0);
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor term = rank == 0 ? grad : at::zeros_like(grad);
    std::vector<at::Tensor> parameters = {
        with_grad(distribute_tensor(at::zeros_like(grad), mesh, parse_placements("R")).tensor(),
                  from_local(term, mesh, parse_placements("P(sum)")).tensor())};
    CollectiveCounter counter;
    EXPECT_NEAR(clip_grad_norm_(parameters, 1.0), expected, 1e-12);
    EXPECT_EQ(counter.total(), 2);  // the reduction of the sum, then the norm's
    EXPECT_EQ(placements_to_string(DTensor(parameters[0].grad()).placements()), "R");
    EXPECT_TRUE(at::allclose(DTensor(parameters[0].grad()).full_tensor(), reference[0].grad()));
    DTENSOR_EXPECT_ERROR(clip_grad_norm_(parameters, 1.0, 0.0),
                         "clip_grad_norm_: norm_type: expected a value > 0 or infinity, found 0");
  });
}

// A gradient whose mesh dims reduce by different ops (sum over one, max over
// the other) is not bucketed by reduce_gradients: clipping still reduces it
// first, alone, so the norm is that of the whole gradient.
TEST(ClipGradTest, GradientsMixingReductionsAreReducedBeforeTheNorm) {
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    // Rank (i, j) holds (i + 1) * (j + 1) * [1, 2, 3]: summed over dim 0
    // then the max over dim 1, the whole gradient is 3 * 2 * [1, 2, 3].
    const int64_t i = rank / 2, j = rank % 2;
    const at::Tensor term = at::arange(1, 4, at::kDouble).mul((i + 1) * (j + 1));
    const at::Tensor whole = at::arange(1, 4, at::kDouble).mul(6);
    std::vector<at::Tensor> parameters = {with_grad(
        distribute_tensor(at::zeros({3}, at::kDouble), mesh, parse_placements("R,R")).tensor(),
        from_local(term, mesh, parse_placements("P(sum),P(max)")).tensor())};
    EXPECT_NEAR(clip_grad_norm_(parameters, 1e9), whole.norm().item<double>(), 1e-12);
    EXPECT_EQ(placements_to_string(DTensor(parameters[0].grad()).placements()), "R,R");
  });
}

}  // namespace
}  // namespace dtensor::nn
