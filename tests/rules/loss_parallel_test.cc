// Copyright 2026 The dtensor Authors.
//
// Kernels that communicate, through redistribute: softmax and log_softmax
// over a split dim, cross entropy over vocabulary-sharded logits (loss
// parallelism) and vector norms over a split dim equal one device, forward
// and backward, and every collective they run is one CollectiveCounter sees.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "tests/rules/rules_test_util.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using rules_testing::dist;
using Counts = std::map<std::string, int64_t, std::less<>>;

constexpr int64_t kIgnored = 2;

// Logits of 7 rows over `classes`, in float64 so that sums split over ranks
// agree with one device to rounding.
at::Tensor logits_of(int64_t classes) {
  return at::arange(7 * classes, at::kDouble).reshape({7, classes}).sin().mul(3);
}

// Targets with one row of the ignored class; valid for any class count > 2.
at::Tensor targets_of(int64_t classes) {
  return at::tensor(std::vector<int64_t>{0, classes - 1, kIgnored, 1, classes / 2, 0, classes - 2},
                    at::kLong);
}

struct LossCase {
  std::vector<int64_t> mesh;
  const char* logits;  // placements of the logits
  int64_t classes;     // 11 over 4 ranks: 3,3,3,2; 3 over 4: one rank empty
  int64_t reduction;
  const char* loss;  // placements of the loss
};

class VocabParallelCrossEntropyTest : public ::testing::TestWithParam<LossCase> {};

// The loss and the logits' gradient equal one device's; the loss is whole
// along the class split (a pending sum along a row split, when the
// reduction sums rows), and the gradient keeps the logits' layout. The
// class weight is replicated: the fused kernel runs.
TEST_P(VocabParallelCrossEntropyTest, MatchesOneDevice) {
  const LossCase& c = GetParam();
  const at::Tensor logits = logits_of(c.classes);
  const at::Tensor target = targets_of(c.classes);
  const at::Tensor weight = at::arange(c.classes, at::kDouble).add(1).div(2);
  const at::Tensor reference_logits = logits.clone().requires_grad_();
  const at::Tensor reference =
      at::cross_entropy_loss(reference_logits, target, weight, c.reduction, kIgnored, 0.0);
  reference.backward(at::ones_like(reference));
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", c.mesh);
    const std::vector<PlacementPtr> placements = parse_placements(c.logits);
    std::vector<PlacementPtr> target_placements;
    for (const PlacementPtr& p : placements) {
      target_placements.push_back(p->split_dim() == 0 ? p : Replicate::make());
    }
    const std::vector<PlacementPtr> whole(c.mesh.size(), Replicate::make());
    const DTensor x = distribute_tensor(logits.clone().requires_grad_(), mesh, placements);
    const DTensor loss(at::cross_entropy_loss(x, distribute_tensor(target, mesh, target_placements),
                                              distribute_tensor(weight, mesh, whole).tensor(),
                                              c.reduction, kIgnored, 0.0));
    EXPECT_EQ(placements_to_string(loss.placements()), c.loss);
    EXPECT_TRUE(at::allclose(loss.full_tensor(), reference, 1e-12, 1e-12))
        << loss.full_tensor() << "\nvs\n"
        << reference;
    loss.tensor().backward(at::ones_like(loss.tensor()));
    const DTensor grad(x.tensor().grad());
    EXPECT_EQ(placements_to_string(grad.placements()), c.logits);
    EXPECT_TRUE(at::allclose(grad.full_tensor(), reference_logits.grad(), 1e-12, 1e-12))
        << grad.full_tensor() << "\nvs\n"
        << reference_logits.grad();
  });
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, VocabParallelCrossEntropyTest,
    ::testing::Values(LossCase{{4}, "S(1)", 11, at::Reduction::Mean, "R"},
                      LossCase{{4}, "S(1)", 11, at::Reduction::Sum, "R"},
                      LossCase{{4}, "S(1)", 11, at::Reduction::None, "R"},
                      LossCase{{4}, "S(1)", 3, at::Reduction::Mean, "R"},
                      LossCase{{2, 2}, "S(0),S(1)", 11, at::Reduction::Mean, "P(sum),R"},
                      LossCase{{2, 2}, "S(0),S(1)", 11, at::Reduction::None, "S(0),R"},
                      LossCase{{2, 2}, "S(1),S(1)", 11, at::Reduction::Sum, "R,R"},
                      LossCase{{2, 2}, "S(1),S(0)", 11, at::Reduction::Mean, "R,P(sum)"}));

// A target outside the classes raises on every rank, as on one device; it
// must not be masked away as another rank's (ignored targets do not count).
TEST(LossParallelTest, TargetOutsideTheClassesRaises) {
  const at::Tensor logits = logits_of(11);
  const at::Tensor target =
      at::tensor(std::vector<int64_t>{0, 50, kIgnored, 1, 3, 0, -100}, at::kLong);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    DTENSOR_EXPECT_ERROR(at::nll_loss(dist(logits, mesh, "S(1)"), dist(target, mesh, "R"), {},
                                      at::Reduction::Mean, -100),
                         "aten::nll_loss_forward: expected every target in [0, 11), found "
                         "targets from 0 to 50");
  });
}

// With the batch split too, the out-of-range target is in one batch shard:
// the ranks agree, and every one raises (none is left waiting).
TEST(LossParallelTest, TargetOutsideTheClassesRaisesOnEveryRank) {
  const at::Tensor logits = logits_of(11);
  const at::Tensor target =
      at::tensor(std::vector<int64_t>{0, 50, kIgnored, 1, 3, 0, 4}, at::kLong);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    DTENSOR_EXPECT_ERROR(at::nll_loss(dist(logits, mesh, "S(0),S(1)"), dist(target, mesh, "S(0),R"),
                                      {}, at::Reduction::Mean, -100),
                         "aten::nll_loss_forward: expected every target in [0, 11), found ");
  });
}

// The fused cross-entropy checks targets too: with the rows split, the bad
// one is on one row shard, and every rank raises (none waits in a
// collective).
TEST(LossParallelTest, FusedCrossEntropyRaisesOnEveryRankForABadTarget) {
  const at::Tensor logits = logits_of(11);
  const at::Tensor target =
      at::tensor(std::vector<int64_t>{0, 50, kIgnored, 1, 3, 0, 4}, at::kLong);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    DTENSOR_EXPECT_ERROR(
        at::cross_entropy_loss(dist(logits, mesh, "S(0),S(1)"), dist(target, mesh, "S(0),R"), {},
                               at::Reduction::Mean, -100, 0.0),
        "aten::cross_entropy_loss: expected every target in [0, 11) or ignore_index (-100), "
        "found one outside");
  });
}

// Label smoothing, with and without class weights, on an uneven split with
// the rows split too: fused, equal to one device forward and backward.
TEST(LossParallelTest, LabelSmoothingMatchesOneDevice) {
  const at::Tensor logits = logits_of(11);
  const at::Tensor target = targets_of(11);
  const at::Tensor weight = at::arange(11, at::kDouble).add(1).div(2);
  for (const bool weighted : {false, true}) {
    for (const int64_t reduction : {at::Reduction::Mean, at::Reduction::Sum, at::Reduction::None}) {
      const at::Tensor reference_logits = logits.clone().requires_grad_();
      const at::Tensor reference = at::cross_entropy_loss(
          reference_logits, target, weighted ? weight : at::Tensor(), reduction, kIgnored, 0.1);
      reference.backward(at::ones_like(reference));
      run_ranks(4, [&](int) {
        const DeviceMesh mesh = init_device_mesh("local", {2, 2});
        const DTensor x = dist(logits.clone().requires_grad_(), mesh, "S(0),S(1)");
        const DTensor loss(
            at::cross_entropy_loss(x, dist(target, mesh, "S(0),R"),
                                   weighted ? dist(weight, mesh, "R,R").tensor() : at::Tensor(),
                                   reduction, kIgnored, 0.1));
        EXPECT_TRUE(at::allclose(loss.full_tensor(), reference, 1e-12, 1e-12))
            << loss.full_tensor() << " vs " << reference;
        loss.tensor().backward(at::ones_like(loss.tensor()));
        EXPECT_TRUE(at::allclose(DTensor(x.tensor().grad()).full_tensor(), reference_logits.grad(),
                                 1e-12, 1e-12));
      });
    }
  }
}

// Counts and statistics are kept in float32 at least: 65,536 rows would be
// inf in float16 (the loss 0, every gradient 0). The float16 loss equals
// one device's float32 loss to float16's precision.
TEST(LossParallelTest, Float16LogitsOfManyRowsKeepAFiniteMean) {
  const at::Tensor logits = at::arange(65536 * 8, at::kFloat).reshape({65536, 8}).sin().mul(2);
  const at::Tensor target = at::arange(65536, at::kLong).remainder(8);
  const double reference = at::cross_entropy_loss(logits.to(at::kHalf).to(at::kFloat), target, {},
                                                  at::Reduction::Mean, -100, 0.0)
                               .item<double>();
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const DTensor x = dist(logits.to(at::kHalf).requires_grad_(), mesh, "S(1)");
    const DTensor loss(
        at::cross_entropy_loss(x, dist(target, mesh, "R"), {}, at::Reduction::Mean, -100, 0.0));
    EXPECT_EQ(loss.dtype(), at::kHalf);
    EXPECT_NEAR(loss.full_tensor().item<double>(), reference, 2e-3 * reference);
    loss.tensor().backward();
    EXPECT_GT(DTensor(x.tensor().grad()).full_tensor().abs().sum().item<double>(), 0);
  });
}

// Arguments are checked on their global shapes, before any collective, so
// every rank raises (none is left waiting in the row maxima's all-reduce).
TEST(LossParallelTest, FusedCrossEntropyRefusesBadArgumentsOnEveryRank) {
  const at::Tensor logits = logits_of(11);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const DTensor x = dist(logits, mesh, "S(0),S(1)");
    const DTensor six_targets = dist(at::zeros({6}, at::kLong), mesh, "S(0),R");
    DTENSOR_EXPECT_ERROR(at::cross_entropy_loss(x, six_targets, {}, at::Reduction::Mean, -100, 0.0),
                         "cross_entropy_loss: target: expected 7 rows (as the input's 7), found 6");
    const DTensor y = dist(targets_of(11), mesh, "S(0),R");
    DTENSOR_EXPECT_ERROR(
        at::cross_entropy_loss(x, y, dist(at::ones({10}, at::kDouble), mesh, "R,R").tensor(),
                               at::Reduction::Mean, -100, 0.0),
        "cross_entropy_loss: weight: expected one per class (11), found 10");
    DTENSOR_EXPECT_ERROR(at::cross_entropy_loss(x, y, {}, at::Reduction::Mean, -100, 1.5),
                         "cross_entropy_loss: label_smoothing: expected a value in [0, 1], "
                         "found 1.5");
  });
}

// What the counter saw while `f` ran, on the calling rank.
template <typename F>
Counts collectives_of(F&& f) {
  CollectiveCounter counter;
  f();
  return counter.by_collective();
}

// cross_entropy_loss runs fused on split classes (dtensor/autograd/
// cross_entropy.cc). Forward: the row maxima, then each row's sum of
// exponentials with its target logit, one all-reduce each (two values per
// row), and no gather of the logits; the loss is whole on every rank, read
// with no collective. Backward: softmax minus the one-hot target on each
// rank's block, no collective (a hand-written Megatron plan: 3 forward, 0
// backward).
TEST(LossParallelTest, CrossEntropyAllReducesAreCounted) {
  const at::Tensor logits = logits_of(11);
  const at::Tensor target = targets_of(11);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const DTensor x = dist(logits.clone().requires_grad_(), mesh, "S(1)");
    const DTensor y = dist(target, mesh, "R");
    at::Tensor loss;
    EXPECT_EQ(collectives_of([&] {
                loss = at::cross_entropy_loss(x, y, {}, at::Reduction::Mean, kIgnored, 0.0);
              }),
              (Counts{{"all_reduce", 2}}));
    EXPECT_EQ(collectives_of([&] { DTensor(loss).full_tensor(); }), Counts{});
    EXPECT_EQ(collectives_of([&] { loss.backward(); }), Counts{});
  });
}

// A norm over a split dim: each rank's part of sum |x|^p, one all-reduce
// (over both mesh dims at once on a 2-D mesh), never a gather.
TEST(LossParallelTest, VectorNormAllReduceIsCounted) {
  const at::Tensor a = at::arange(40, at::kDouble).reshape({8, 5}).cos();
  run_ranks(4, [&](int) {
    for (const auto& [shape, layout] :
         {std::pair<std::vector<int64_t>, const char*>{{4}, "S(0)"}, {{2, 2}, "S(0),S(1)"}}) {
      SCOPED_TRACE(layout);
      const DeviceMesh mesh = init_device_mesh("local", shape);
      const DTensor d = dist(a, mesh, layout);
      for (const double p : {2.0, 1.0, std::numeric_limits<double>::infinity()}) {
        at::Tensor norm;
        EXPECT_EQ(collectives_of([&] { norm = at::linalg_vector_norm(d, p); }),
                  (Counts{{"all_reduce", 1}}));
        const DTensor result(norm);
        EXPECT_EQ(placements_to_string(result.placements()), shape.size() == 1 ? "R" : "R,R");
        EXPECT_TRUE(at::allclose(result.full_tensor(), at::linalg_vector_norm(a, p), 1e-12)) << p;
      }
    }
  });
}

// softmax and log_softmax over a split dim, uneven and with an empty shard,
// in float64 and (computed in float, rounded once) bfloat16: values and
// gradients equal one device's, the layout kept.
TEST(LossParallelTest, SoftmaxOverASplitDimMatchesOneDevice) {
  for (const int64_t columns : {int64_t{11}, int64_t{3}}) {
    for (const at::ScalarType dtype : {at::kDouble, at::kBFloat16}) {
      SCOPED_TRACE(::testing::Message() << columns << " columns, " << dtype);
      const at::Tensor a =
          at::arange(5 * columns, at::kDouble).reshape({5, columns}).sin().to(dtype);
      const at::Tensor scale = at::arange(5 * columns, at::kDouble).cos().reshape({5, columns});
      const double tolerance = dtype == at::kDouble ? 1e-12 : 1e-2;
      for (const bool log : {false, true}) {
        const at::Tensor reference_input = a.clone().requires_grad_();
        const at::Tensor reference =
            log ? at::log_softmax(reference_input, 1) : at::softmax(reference_input, 1);
        reference.to(at::kDouble).mul(scale).sum().backward();
        run_ranks(4, [&](int) {
          const DeviceMesh mesh = init_device_mesh("local", {4});
          const DTensor x = dist(a.clone().requires_grad_(), mesh, "S(1)");
          const at::Tensor out = log ? at::log_softmax(x, 1) : at::softmax(x, 1);
          EXPECT_EQ(rules_testing::placements_of(out), "S(1)");
          EXPECT_TRUE(at::allclose(DTensor(out).full_tensor().to(at::kDouble),
                                   reference.to(at::kDouble), tolerance, tolerance));
          out.to(at::kDouble).mul(dist(scale, mesh, "S(1)")).sum().backward();
          const DTensor grad(x.tensor().grad());
          EXPECT_EQ(placements_to_string(grad.placements()), "S(1)");
          EXPECT_TRUE(at::allclose(grad.full_tensor().to(at::kDouble),
                                   reference_input.grad().to(at::kDouble), tolerance, tolerance));
        });
      }
    }
  }
}

}  // namespace
}  // namespace dtensor
