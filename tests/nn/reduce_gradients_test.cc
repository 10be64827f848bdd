// Copyright 2026 The dtensor Authors.
//
// dtensor::nn::reduce_gradients: Partial DTensor gradients are reduced in
// one collective per (mesh, Partial mesh dims, reduce op, dtype, device)
// bucket, each ending with its Partial dims read as Replicate and holding
// exactly the value its own full_tensor() had; everything else is left
// alone, untouched and uncounted.
#include <dtensor/nn/reduce_gradients.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim.h>

#include <map>
#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>

namespace dtensor::nn {
namespace {

using Counts = std::map<std::string, int64_t, std::less<>>;

// A parameter laid out as `parameter_layout` whose gradient is `grad`.
at::Tensor parameter_with_grad(const at::Tensor& global, const DeviceMesh& mesh,
                               const char* parameter_layout, const at::Tensor& grad) {
  at::Tensor parameter =
      distribute_tensor(global, mesh, parse_placements(parameter_layout)).tensor();
  parameter.mutable_grad() = grad;
  return parameter;
}

// Rank `rank`'s term of a pending sum: distinct on every rank and element,
// so a missing, doubled or misplaced term shows in the total.
at::Tensor term(const std::vector<int64_t>& local_shape, int rank, double offset,
                at::ScalarType dtype = at::kDouble) {
  int64_t n = 1;
  for (int64_t s : local_shape) n *= s;
  return at::arange(n, at::kDouble)
      .mul(0.25 * (rank + 1))
      .add(offset + 100 * rank)
      .sin()
      .reshape(local_shape)
      .to(dtype);
}

// Whether `got` is a DTensor laid out as `placements` whose whole value is
// `expected` within 1e-12 (the local backend sums in rank order, as
// full_tensor does).
::testing::AssertionResult Reduced(const at::Tensor& got, const char* placements,
                                   const at::Tensor& expected) {
  if (!got.defined() || !is_dtensor(got)) {
    return ::testing::AssertionFailure() << "not a DTensor gradient";
  }
  const DTensor grad(got);
  const std::string layout = placements_to_string(grad.placements());
  const at::Tensor whole = grad.full_tensor();
  if (layout != placements) {
    return ::testing::AssertionFailure() << "placements " << layout << ", expected " << placements;
  }
  if (whole.sizes() != expected.sizes() || !at::allclose(whole, expected, 0, 1e-12)) {
    return ::testing::AssertionFailure() << "value\n" << whole << "\nexpected\n" << expected;
  }
  return ::testing::AssertionSuccess();
}

// Nothing to reduce: plain gradients, no gradient, replicated and sharded
// DTensor gradients all stay the very tensors they were, with no collective.
TEST(ReduceGradientsTest, LeavesEverythingButPartialGradientsAlone) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor values = at::arange(14, at::kDouble).reshape({7, 2});
    at::Tensor plain = values.clone();
    plain.mutable_grad() = values * 2;
    const at::Tensor no_grad = distribute_tensor(values, mesh, parse_placements("R")).tensor();
    const at::Tensor replicated = parameter_with_grad(
        values, mesh, "R", distribute_tensor(values * 3, mesh, parse_placements("R")).tensor());
    // 7 rows over 4 ranks: 2, 2, 2, 1.
    const at::Tensor sharded =
        parameter_with_grad(values, mesh, "S(0)",
                            distribute_tensor(values * 4, mesh, parse_placements("S(0)")).tensor());
    const std::vector<at::Tensor> parameters = {plain, no_grad, replicated, sharded};
    std::vector<at::Tensor> before;
    for (const at::Tensor& p : parameters) before.push_back(p.grad());
    CollectiveCounter counter;
    EXPECT_EQ(reduce_gradients(parameters), 0);
    EXPECT_EQ(counter.total(), 0);
    EXPECT_EQ(reduce_gradients({}), 0);
    for (size_t i = 0; i < parameters.size(); ++i) {
      EXPECT_EQ(parameters[i].grad().defined(), before[i].defined()) << i;
      if (before[i].defined()) {
        EXPECT_TRUE(parameters[i].grad().is_same(before[i])) << i;
      }
    }
  });
}

// Two Partial gradients of different shapes on a 1-D mesh share one
// all-reduce; each keeps its own shape and value. A second call finds
// nothing left to reduce.
TEST(ReduceGradientsTest, PartialGradientsOnA1DMeshShareOneAllReduce) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const std::vector<PlacementPtr> partial = parse_placements("P(sum)");
    const at::Tensor a =
        parameter_with_grad(at::zeros({7, 3}, at::kDouble), mesh, "R",
                            from_local(term({7, 3}, rank, 0.0), mesh, partial).tensor());
    const at::Tensor b =
        parameter_with_grad(at::zeros({5}, at::kDouble), mesh, "R",
                            from_local(term({5}, rank, 1.0), mesh, partial).tensor());
    // What the gradients are worth, from full_tensor (one all-reduce each),
    // and from the terms themselves.
    const at::Tensor expected_a = DTensor(a.grad()).full_tensor();
    const at::Tensor expected_b = DTensor(b.grad()).full_tensor();
    at::Tensor sum_a = at::zeros({7, 3}, at::kDouble), sum_b = at::zeros({5}, at::kDouble);
    for (int r = 0; r < 4; ++r) {
      sum_a += term({7, 3}, r, 0.0);
      sum_b += term({5}, r, 1.0);
    }
    EXPECT_TRUE(at::allclose(expected_a, sum_a, 0, 1e-12));
    EXPECT_TRUE(at::allclose(expected_b, sum_b, 0, 1e-12));

    CollectiveCounter counter;
    EXPECT_EQ(reduce_gradients({a, b}), 1);
    EXPECT_EQ(counter.by_collective(), (Counts{{"all_reduce", 1}}));
    EXPECT_TRUE(Reduced(a.grad(), "R", expected_a));
    EXPECT_TRUE(Reduced(b.grad(), "R", expected_b));
    EXPECT_EQ(DTensor(a.grad()).to_local().sizes(), (at::IntArrayRef{7, 3}));

    CollectiveCounter again;
    EXPECT_EQ(reduce_gradients({a, b}), 0);
    EXPECT_EQ(again.total(), 0);
  });
}

// On (dp, tp) = (2, 2): [P,R] and [P,S(0)] reduce over dp alone (one
// bucket, though the S(0) shards are uneven: 7 rows over 2 ranks), [P,P]
// over both dims (another): two collectives in all. Each gradient then holds
// its own full_tensor() with Partial read as Replicate.
TEST(ReduceGradientsTest, BucketsByPartialMeshDimsOnA2DMesh) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    const int64_t tp = mesh.get_local_rank("tp");
    const at::Tensor p_r = parameter_with_grad(
        at::zeros({3, 4}, at::kDouble), mesh, "R,R",
        from_local(term({3, 4}, rank, 0.0), mesh, parse_placements("P(sum),R")).tensor());
    // Rows 0..3 on tp rank 0, 4..6 on tp rank 1; each rank's term is its
    // part of the sum over dp of its tp shard.
    const std::vector<int64_t> rows = {tp == 0 ? int64_t{4} : int64_t{3}, 5};
    const at::Tensor p_s = parameter_with_grad(
        at::zeros({7, 5}, at::kDouble), mesh, "R,S(0)",
        from_local(term(rows, rank, 2.0), mesh, parse_placements("P(sum),S(0)")).tensor());
    const at::Tensor p_p = parameter_with_grad(
        at::zeros({6}, at::kDouble), mesh, "R,R",
        from_local(term({6}, rank, 4.0), mesh, parse_placements("P(sum),P(sum)")).tensor());
    const at::Tensor expected_r = DTensor(p_r.grad()).full_tensor();
    const at::Tensor expected_s = DTensor(p_s.grad()).full_tensor();
    const at::Tensor expected_p = DTensor(p_p.grad()).full_tensor();
    // [P,P] sums the four ranks' terms.
    at::Tensor sum_p = at::zeros({6}, at::kDouble);
    for (int r = 0; r < 4; ++r) sum_p += term({6}, r, 4.0);
    EXPECT_TRUE(at::allclose(expected_p, sum_p, 0, 1e-12));

    CollectiveCounter counter;
    EXPECT_EQ(reduce_gradients({p_r, p_s, p_p}), 2);
    EXPECT_EQ(counter.total(), 2);
    EXPECT_EQ(counter.count("all_reduce"), 2);
    EXPECT_TRUE(Reduced(p_r.grad(), "R,R", expected_r));
    EXPECT_TRUE(Reduced(p_s.grad(), "R,S(0)", expected_s));
    EXPECT_TRUE(Reduced(p_p.grad(), "R,R", expected_p));
    EXPECT_EQ(DTensor(p_s.grad()).to_local().sizes(), (at::IntArrayRef(rows)));
  });
}

// Another reduce op or another dtype is another bucket; a gradient whose
// mesh dims reduce by different ops is left as it is.
TEST(ReduceGradientsTest, ReduceOpsAndDtypesDoNotMix) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor sum = parameter_with_grad(
        at::zeros({4}, at::kDouble), mesh, "R",
        from_local(term({4}, rank, 0.0), mesh, parse_placements("P(sum)")).tensor());
    const at::Tensor max = parameter_with_grad(
        at::zeros({4}, at::kDouble), mesh, "R",
        from_local(term({4}, rank, 1.0), mesh, parse_placements("P(max)")).tensor());
    const at::Tensor single = parameter_with_grad(
        at::zeros({4}, at::kFloat), mesh, "R",
        from_local(term({4}, rank, 2.0, at::kFloat), mesh, parse_placements("P(sum)")).tensor());
    const at::Tensor expected_sum = DTensor(sum.grad()).full_tensor();
    const at::Tensor expected_max = DTensor(max.grad()).full_tensor();
    const at::Tensor expected_single = DTensor(single.grad()).full_tensor();
    at::Tensor terms_max = term({4}, 0, 1.0);
    for (int r = 1; r < 4; ++r) terms_max = at::maximum(terms_max, term({4}, r, 1.0));
    EXPECT_TRUE(at::equal(expected_max, terms_max));

    CollectiveCounter counter;
    EXPECT_EQ(reduce_gradients({sum, max, single}), 3);
    EXPECT_EQ(counter.by_collective(), (Counts{{"all_reduce", 3}}));
    EXPECT_TRUE(Reduced(sum.grad(), "R", expected_sum));
    EXPECT_TRUE(Reduced(max.grad(), "R", expected_max));
    EXPECT_EQ(single.grad().scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(DTensor(single.grad()).full_tensor(), expected_single));
  });
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const at::Tensor mixed = parameter_with_grad(
        at::zeros({3}, at::kDouble), mesh, "R,R",
        from_local(term({3}, rank, 0.0), mesh, parse_placements("P(sum),P(max)")).tensor());
    const at::Tensor before = mixed.grad();
    CollectiveCounter counter;
    EXPECT_EQ(reduce_gradients({mixed}), 0);
    EXPECT_EQ(counter.total(), 0);
    EXPECT_TRUE(mixed.grad().is_same(before));
    EXPECT_EQ(placements_to_string(DTensor(mixed.grad()).placements()), "P(sum),P(max)");
  });
}

// After the reduction an optimizer's update of a replicated parameter meets
// a replicated gradient and communicates nothing; without it, the update
// reduces each Partial gradient itself.
TEST(ReduceGradientsTest, OptimizerStepAfterwardsCommunicatesNothing) {
  for (const bool reduce_first : {true, false}) {
    SCOPED_TRACE(reduce_first ? "reduced first" : "left to the optimizer");
    run_ranks(4, [&](int rank) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      const at::Tensor init = at::arange(6, at::kDouble).reshape({2, 3});
      std::vector<at::Tensor> parameters;
      at::Tensor expected_after[2];
      for (int i = 0; i < 2; ++i) {
        parameters.push_back(parameter_with_grad(
            init + i, mesh, "R",
            from_local(term({2, 3}, rank, i), mesh, parse_placements("P(sum)")).tensor()));
        expected_after[i] = init + i - DTensor(parameters[i].grad()).full_tensor() * 0.5;
      }
      torch::optim::SGD sgd(parameters, 0.5);
      if (reduce_first) {
        EXPECT_EQ(reduce_gradients(parameters), 1);
      }
      CollectiveCounter counter;
      sgd.step();
      EXPECT_EQ(counter.total(), reduce_first ? 0 : 2);
      for (int i = 0; i < 2; ++i) {
        EXPECT_TRUE(Reduced(parameters[i], "R", expected_after[i])) << i;
      }
    });
  }
}

}  // namespace
}  // namespace dtensor::nn
