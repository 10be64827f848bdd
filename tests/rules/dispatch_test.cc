// Copyright 2026 The dtensor Authors.
//
// ATen calls on DTensors: the wrapper's metadata, mixing plain tensors,
// missing rules and the modes, in-place and out= forms, the propagation
// cache, and changing the rule registry at run time.
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/core/tensor_impl.h>
#include <dtensor/dispatch/dispatch.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/rules/local_kernel.h>
#include <dtensor/rules/propagation_cache.h>
#include <dtensor/rules/strategy.h>
#include "tests/rules/rules_test_util.h"
#include "tests/support/expect_error.h"
#include "tests/support/scoped_cache_capacity.h"

namespace dtensor {
namespace {

using rules_testing::dist;
using rules_testing::error_of;
using rules_testing::iota;
using rules_testing::placements_of;
using rules_testing::signed_iota;

// Partial(sum) terms of `global` on a 1-D mesh whose terms differ from the
// value on every rank (rank 0 holds global + 30 (n-1), the others -30), so a
// kernel run on unreduced terms gives a visibly wrong answer.
DTensor partial_sum_terms(const at::Tensor& global, const DeviceMesh& mesh) {
  const int64_t n = mesh.shape()[0];
  const int64_t rank = mesh.coordinate()[0];
  at::Tensor local = rank == 0 ? global + 30 * (n - 1) : at::full_like(global, -30);
  return from_local(local, mesh, parse_placements("P(sum)"));
}

// ---------------------------------------------------------------------------
// The wrapper

// A pending sum that several ops need reduced is reduced once: the first
// op's all-reduce is remembered and later readers take its result, as a
// hand-written plan reduces a value once for all its uses.
TEST(DispatchTest, PendingSumIsReducedOnceForAllItsReaders) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({6, 5});
    const DTensor x = partial_sum_terms(a, mesh);
    CollectiveCounter counter;
    EXPECT_DT(at::pow(x, 2), at::pow(a, 2), "R");
    EXPECT_DT(at::exp(x), at::exp(a), "R");
    // A linear op reads the reduced form too: replicated, not pending.
    EXPECT_DT(at::mul(x, 3), at::mul(a, 3), "R");
    EXPECT_EQ(counter.count("all_reduce"), 1);
    EXPECT_EQ(counter.total(), 1);
    EXPECT_EQ(placements_of(x), "P(sum)");  // the DTensor itself is unchanged
  });
}

// Autograd's mm backward reads a gradient both as it is and transposed: a
// view of a pending sum reduces the DTensor it views, once for both readers.
TEST(DispatchTest, AViewOfAPendingSumReducesItsOriginOnceForBoth) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({6, 5});
    const at::Tensor b = signed_iota({6, 3});
    const DTensor g = partial_sum_terms(a, mesh);
    CollectiveCounter counter;
    const at::Tensor transposed = g.tensor().t();
    EXPECT_DT(at::exp(transposed), at::exp(a.t()), "R");
    EXPECT_DT(at::exp(g), at::exp(a), "R");
    // A new view of it reads that form too: the product is replicated.
    EXPECT_DT(at::mm(g.tensor().t(), dist(b, mesh, "R")), at::mm(a.t(), b), "R");
    EXPECT_EQ(counter.count("all_reduce"), 1);
    EXPECT_EQ(counter.total(), 1);
    EXPECT_EQ(placements_of(transposed), "P(sum)");
  });
}

// Views of views (a slice, then its transpose) reduce their first origin,
// and each takes its view of that one reduction.
TEST(DispatchTest, AViewOfAViewOfAPendingSumReducesTheFirstOrigin) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({6, 5});
    const DTensor g = partial_sum_terms(a, mesh);
    const at::Tensor rows = g.tensor().narrow(0, 1, 4);
    const at::Tensor transposed = rows.t();
    CollectiveCounter counter;
    EXPECT_DT(at::exp(transposed), at::exp(a.narrow(0, 1, 4).t()), "R");
    EXPECT_DT(at::exp(rows), at::exp(a.narrow(0, 1, 4)), "R");
    EXPECT_DT(at::exp(g), at::exp(a), "R");
    EXPECT_EQ(counter.count("all_reduce"), 1);
    EXPECT_EQ(counter.total(), 1);
  });
}

// A view whose origin was written since it was taken reduces on its own.
TEST(DispatchTest, AViewOfAWrittenPendingSumReducesItself) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({6, 5});
    DTensor g = partial_sum_terms(a, mesh);
    const at::Tensor transposed = g.tensor().t();
    at::Tensor written = g;
    written.mul_(2);  // the view shares the memory: it reads 2a too
    CollectiveCounter counter;
    EXPECT_DT(at::exp(transposed), at::exp(a.t() * 2), "R");
    EXPECT_DT(at::exp(g), at::exp(a * 2), "R");
    EXPECT_EQ(counter.count("all_reduce"), 2);
  });
}

// A pending sum meeting a row-split weight is reduced (one all-reduce), not
// kept pending by gathering the weight, which would leave a larger sum to
// reduce further on: what a hand-written plan does with a gradient that
// reaches a row-parallel layer.
TEST(DispatchTest, APendingSumMeetingARowSplitWeightIsReduced) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({32, 16}).to(at::kDouble);
    const at::Tensor w = signed_iota({16, 24}).to(at::kDouble);
    const DTensor g = partial_sum_terms(a, mesh);
    const DTensor split_weight = dist(w, mesh, "S(1)");
    at::Tensor product;
    {
      CollectiveCounter counter;
      product = at::mm(g, split_weight);
      EXPECT_EQ(counter.count("all_reduce"), 1);
      EXPECT_EQ(counter.total(), 1);
    }
    EXPECT_DT(product, at::mm(a, w), "S(1)");
  });
}

// A write into the DTensor, or into its shard through to_local, makes the
// remembered form stale: the next reader reduces the new values again.
TEST(DispatchTest, WritesMakeAReducedFormStale) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({6, 5});
    DTensor x = partial_sum_terms(a, mesh);
    CollectiveCounter counter;
    EXPECT_DT(at::exp(x), at::exp(a), "R");
    at::Tensor written = x;
    written.mul_(0.5);  // linear: stays a pending sum, no collective
    EXPECT_DT(at::exp(x), at::exp(a * 0.5), "R");
    x.to_local().mul_(2);
    EXPECT_DT(at::exp(x), at::exp(a), "R");
    EXPECT_EQ(counter.count("all_reduce"), 3);
  });
}

TEST(DispatchTest, WrapperReportsGlobalMetadata) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 3});
    DTensor da = dist(a, mesh, "S(0)");
    const at::Tensor& t = da;
    EXPECT_TRUE(is_dtensor(t));
    EXPECT_FALSE(is_dtensor(a));
    EXPECT_EQ(t.sizes(), a.sizes());
    EXPECT_EQ(t.dim(), 2);
    EXPECT_EQ(t.numel(), 15);
    EXPECT_EQ(t.scalar_type(), at::kFloat);
    EXPECT_EQ(t.device(), a.device());
    EXPECT_EQ(t.strides(), a.strides());
    EXPECT_TRUE(t.is_contiguous());
    // The local shard is the rank's rows (2, 2, 1, 0).
    const int64_t rows[] = {2, 2, 1, 0};
    EXPECT_EQ(da.to_local().size(0), rows[rank]);
    // A transposed DTensor reports transposed global strides.
    at::Tensor tt = dist(iota({8, 3}), mesh, "S(0)").tensor().t();
    EXPECT_TRUE(is_dtensor(tt));
    EXPECT_EQ(tt.sizes(), (std::vector<int64_t>{3, 8}));
    EXPECT_EQ(tt.strides(), (std::vector<int64_t>{1, 3}));
    EXPECT_FALSE(tt.is_contiguous());
    // Where some rank holds at most one index of a dim (rows 2, 2, 1, 0 here),
    // that rank's strides cannot tell the dim's order, so every rank reports
    // the dim in dim order: the strides agree on every rank.
    at::Tensor ambiguous = t.t();
    EXPECT_EQ(ambiguous.sizes(), (std::vector<int64_t>{3, 5}));
    EXPECT_EQ(ambiguous.strides(), (std::vector<int64_t>{5, 1}));
    EXPECT_TRUE(at::equal(DTensor(ambiguous).full_tensor(), a.t()));
    // Viewing a plain tensor as a DTensor is refused.
    EXPECT_THROW(DTensor{a}, Error);
    // An int64 DTensor reports int64.
    DTensor di = dist(iota({4, 2}, 1, at::kLong), mesh, "S(1)");
    EXPECT_EQ(di.tensor().scalar_type(), at::kLong);
    EXPECT_EQ(di.tensor().sizes(), (std::vector<int64_t>{4, 2}));
  });
}

// As PyTorch's: the shard of a view is the local kernel's view of the viewed
// shard, its strides and memory included (no contiguous copy), and later
// collectives on such a shard are exact.
TEST(DispatchTest, ViewsKeepTheLocalViewsStrides) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = iota({8, 16});
    const DTensor rows = dist(a, mesh, "S(0)");  // local [2, 16]
    for (const at::Tensor& view : {rows.tensor().t(), rows.tensor().transpose(0, 1)}) {
      const DTensor t(view);
      EXPECT_EQ(placements_to_string(t.placements()), "S(1)");
      EXPECT_EQ(t.to_local().sizes(), (std::vector<int64_t>{16, 2}));
      EXPECT_EQ(t.to_local().strides(), (std::vector<int64_t>{1, 16}));
      EXPECT_EQ(t.to_local().data_ptr(), rows.to_local().data_ptr());
      EXPECT_TRUE(at::equal(t.to_local(), a.chunk(4)[rank].t()));
      EXPECT_TRUE(at::equal(t.full_tensor(), a.t()));
      EXPECT_DT(t.redistribute(parse_placements("S(0)")).tensor(), a.t(), "S(0)");
    }
    // permute(2, 0, 1) of a [4, 8, 6] S(1): the local [4, 2, 6] permuted.
    const at::Tensor b = iota({4, 8, 6});
    const DTensor middle = dist(b, mesh, "S(1)");
    const DTensor p(middle.tensor().permute({2, 0, 1}));
    EXPECT_EQ(p.to_local().strides(), (std::vector<int64_t>{1, 12, 6}));
    EXPECT_EQ(p.to_local().data_ptr(), middle.to_local().data_ptr());
    EXPECT_TRUE(at::equal(p.full_tensor(), b.permute({2, 0, 1})));
    // Pending sums on a strided shard reduce exactly.
    const DTensor terms = from_local((a * (rank + 1)).t(), mesh, parse_placements("P(sum)"));
    EXPECT_EQ(terms.to_local().strides(), (std::vector<int64_t>{1, 16}));
    EXPECT_DT(terms.redistribute(parse_placements("S(1)")).tensor(), a.t() * 10, "S(1)");
    EXPECT_DT(terms.redistribute(parse_placements("R")).tensor(), a.t() * 10, "R");
  });
}

TEST(DispatchTest, ResultsAreDTensorsWithGlobalValues) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({10, 4});
    at::Tensor w = iota({4, 3}, -5);
    DTensor da = dist(a, mesh, "S(0)");
    DTensor dw = dist(w, mesh, "R");
    EXPECT_DT(at::mm(da, dw), at::mm(a, w), "S(0)");
    EXPECT_DT(da.tensor() + da.tensor(), a + a, "S(0)");
    EXPECT_DT(-da.tensor(), -a, "S(0)");
  });
}

// The dispatcher reads the arguments where the call left them and replaces
// them by the results only at the end: one DTensor passed twice (alone, in a
// Tensor[], or as the tensor written and the one read) is read twice, and
// the arguments keep their shards and values.
TEST(DispatchTest, ADTensorPassedTwiceIsReadTwiceAndLeftUnchanged) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({8, 3});
    DTensor x = dist(a, mesh, "S(0)");
    const at::Tensor shard = x.to_local();
    EXPECT_DT(at::mul(x, x), a * a, "S(0)");
    EXPECT_DT(at::cat({x.tensor(), x.tensor()}, 1), at::cat({a, a}, 1), "S(0)");
    EXPECT_TRUE(x.to_local().is_same(shard));
    EXPECT_DT(x, a, "S(0)");
    DTensor y = dist(a.clone(), mesh, "S(0)");
    const at::Tensor& r = y.tensor().add_(y.tensor());
    EXPECT_TRUE(r.is_same(y.tensor()));
    EXPECT_DT(y, a * 2, "S(0)");
  });
}

// ---------------------------------------------------------------------------
// Plain tensors mixed with DTensors

TEST(DispatchTest, PlainTensorMixedWithDTensorIsRejectedNamingTheOp) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 3});
    DTensor da = dist(a, mesh, "S(0)");
    const std::string message = error_of([&] { at::add(da, a); });
    EXPECT_CONTAINS(message, "aten::add.Tensor");
    EXPECT_CONTAINS(message, "plain tensor");
    EXPECT_CONTAINS(message, "[5, 3]");
    // A plain 1-D operand (broadcast) is refused too.
    DTENSOR_EXPECT_ERROR(at::mul(da, iota({3})), "aten::mul.Tensor");
  });
}

TEST(DispatchTest, ZeroDimPlainTensorCountsAsReplicate) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 3});
    DTensor da = dist(a, mesh, "S(0)");
    at::Tensor two = at::scalar_tensor(2.0, at::kFloat);
    EXPECT_DT(at::add(da, two), a + two, "S(0)");
    EXPECT_DT(at::mul(two, da), two * a, "S(0)");
    EXPECT_DT(at::sub(da, two), a - two, "S(0)");
  });
}

TEST(DispatchTest, ImplicitReplicationAdmitsPlainTensors) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 3});
    at::Tensor b = iota({5, 3}, 100);
    at::Tensor bias = iota({3}, -1);
    DTensor da = dist(a, mesh, "S(0)");
    {
      ScopedImplicitReplication mix;
      // The plain operand is Replicate: slicing it to S(0) costs nothing.
      EXPECT_DT(at::add(da, b), a + b, "S(0)");
      EXPECT_DT(at::add(b, da), b + a, "S(0)");
      EXPECT_DT(at::mul(da, bias), a * bias, "S(0)");
      // Written in place, the DTensor keeps its layout; the plain operand
      // is sliced to it.
      DTensor x = dist(a.clone(), mesh, "S(0)");
      EXPECT_DT(x.tensor().add_(b), a + b, "S(0)");
      EXPECT_DT(x, a + b, "S(0)");
      // A plain operand beside a Partial one.
      EXPECT_DT(at::mm(dist(iota({5, 3}), mesh, "S(1)"), iota({3, 2})),
                at::mm(iota({5, 3}), iota({3, 2})));
    }
    // The mode ends with its scope.
    DTENSOR_EXPECT_ERROR(at::add(da, b), "plain tensor");
  });
}

// ---------------------------------------------------------------------------
// Ops without a rule, the replicate fallback, strict mode

TEST(DispatchTest, OpWithoutRuleNamesOpAndPlacements) {
  ASSERT_EQ(strategies().find("aten::cumsum"), nullptr)
      << "aten::cumsum has a strategy now: pick another op without one for this test";
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 3});
    DTensor da = dist(a, mesh, "S(0)");
    const std::string message = error_of([&] { at::cumsum(da, 1); });
    EXPECT_CONTAINS(message, "no sharding rule");
    EXPECT_CONTAINS(message, "aten::cumsum");
    EXPECT_CONTAINS(message, "S(0)");
    EXPECT_CONTAINS(message, "dtensor::strategies().add(\"aten::cumsum\", strategy)");
    EXPECT_CONTAINS(message, "ScopedReplicateFallback");
  });
}

TEST(DispatchTest, ReplicateFallbackRunsOpsWithoutRules) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 3});
    at::Tensor b = iota({7, 6}, -20);
    {
      ScopedReplicateFallback fallback;
      EXPECT_DT(at::cumsum(dist(a, mesh, "S(0)"), 1), at::cumsum(a, 1));
      EXPECT_DT(at::cumsum(dist(a, mesh, "S(0)"), 0), at::cumsum(a, 0));
      EXPECT_DT(at::cumsum(dist(b, mesh, "S(1)"), 1), at::cumsum(b, 1));
      EXPECT_DT(at::cumsum(partial_sum_terms(b, mesh), 0), at::cumsum(b, 0));
      // Ops with rules are unaffected by the fallback.
      EXPECT_DT(at::relu(dist(b, mesh, "S(1)")), at::relu(b), "S(1)");
    }
    DTENSOR_EXPECT_ERROR(at::cumsum(dist(a, mesh, "S(0)"), 1), "no sharding rule");
  });
}

TEST(DispatchTest, ReplicateFallbackOnTwoDimMesh) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = iota({5, 7});
    ScopedReplicateFallback fallback;
    EXPECT_DT(at::cumsum(dist(a, mesh, "S(0),S(1)"), 1), at::cumsum(a, 1));
    EXPECT_DT(at::cumsum(dist(a, mesh, "P(sum),S(0)"), 0), at::cumsum(a, 0));
  });
}

TEST(DispatchTest, StrictModeRaisesOnlyWhenARedistributeIsNeeded) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({8, 4});
    at::Tensor w = iota({4, 6}, -10);
    DTensor a_s1 = dist(a, mesh, "S(1)");
    DTensor a_s0 = dist(a, mesh, "S(0)");
    DTensor w_r = dist(w, mesh, "R");
    {
      ScopedStrictMode strict;
      const std::string message = error_of([&] { at::mm(a_s1, w_r); });
      EXPECT_CONTAINS(message, "strict mode");
      EXPECT_CONTAINS(message, "aten::mm");
      // No redistribute needed: runs.
      EXPECT_DT(at::mm(a_s0, w_r), at::mm(a, w), "S(0)");
      EXPECT_DT(at::mm(a_s1, dist(w, mesh, "S(0)")), at::mm(a, w), "P(sum)");
      EXPECT_DT(at::relu(a_s1), at::relu(a), "S(1)");
      // relu of a Partial needs a reduction: strict mode refuses it.
      DTENSOR_EXPECT_ERROR(at::relu(partial_sum_terms(a, mesh)), "strict mode");
    }
    // Outside the mode the same call redistributes and is right.
    EXPECT_DT(at::mm(a_s1, w_r), at::mm(a, w));
  });
}

// ---------------------------------------------------------------------------
// In-place and out= forms

TEST(DispatchTest, InPlaceOpsKeepTheLayoutAndUpdateValues) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = signed_iota({5, 3});
    at::Tensor b = iota({5, 3}, 50);
    // (x is made from a copy of `a`: a Replicate DTensor may share its storage.)
    {
      DTensor x = dist(a.clone(), mesh, "S(0)");
      const at::Tensor& r = x.tensor().add_(dist(b, mesh, "S(0)"));
      EXPECT_TRUE(r.is_same(x.tensor()));
      EXPECT_DT(x, a + b, "S(0)");
      x.tensor().mul_(3);
      EXPECT_DT(x, (a + b) * 3, "S(0)");
      x.tensor().mul_(dist(b, mesh, "R"));
      EXPECT_DT(x, (a + b) * 3 * b, "S(0)");
    }
    {
      // The written operand is Replicate: the other one is gathered, never x.
      DTensor x = dist(a.clone(), mesh, "R");
      x.tensor().add_(dist(b, mesh, "S(0)"));
      EXPECT_DT(x, a + b, "R");
    }
    {
      // A Partial operand of a non-linear in-place op is reduced first.
      DTensor x = dist(a.clone(), mesh, "S(0)");
      x.tensor().mul_(partial_sum_terms(b, mesh));
      EXPECT_DT(x, a * b, "S(0)");
    }
    {
      // Partial + Partial in place stays Partial.
      DTensor x = partial_sum_terms(a, mesh);
      x.tensor().add_(partial_sum_terms(b, mesh));
      EXPECT_DT(x, a + b, "P(sum)");
    }
    {
      DTensor x = dist(a.clone(), mesh, "S(1)");
      x.tensor().relu_();
      EXPECT_DT(x, at::relu(a), "S(1)");
    }
  });
}

// Found by the rule verifier: the engine's own all-Replicate row did not
// relayout the tensor an in-place view writes, so t_ of a replicated DTensor
// raised, and ops returning a plain value failed to infer output shapes on
// libtorch 1.13 (no meta kernels).
TEST(DispatchTest, InPlaceViewsOfReplicatedDTensorsTakeTheNewShape) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({5, 3});
    DTensor x = dist(a.clone(), mesh, "R");
    x.tensor().t_();
    EXPECT_DT(x, a.t(), "R");
    x.tensor().unsqueeze_(0);
    EXPECT_DT(x, a.t().unsqueeze(0), "R");
    x.tensor().transpose_(0, 2);
    EXPECT_DT(x, a.t().unsqueeze(0).transpose(0, 2), "R");
  });
}

TEST(DispatchTest, OpsReturningPlainValuesRunOnWholeTensors) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({5, 3});
    const at::Tensor x = dist(a, mesh, "S(0)").tensor();
    EXPECT_EQ(x.sum().item<float>(), a.sum().item<float>());
    EXPECT_TRUE(at::equal(x, dist(a, mesh, "S(1)").tensor()));
    EXPECT_FALSE(at::equal(x, dist(a + 1, mesh, "S(0)").tensor()));
    EXPECT_TRUE(at::allclose(x, dist(a + 1e-9, mesh, "R").tensor()));
    EXPECT_TRUE(dist(iota({1}), mesh, "R").tensor().is_nonzero());
  });
}

TEST(DispatchTest, OutFormWritesIntoTheDTensor) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 3});
    at::Tensor b = iota({5, 3}, -7);
    DTensor out = dist(at::zeros({5, 3}), mesh, "S(0)");
    at::Tensor out_tensor = out.tensor();
    const at::Tensor r = at::add_out(out_tensor, dist(a, mesh, "S(0)"), dist(b, mesh, "S(0)"));
    EXPECT_TRUE(r.is_same(out.tensor()));
    EXPECT_DT(out, a + b, "S(0)");
    at::mul_out(out_tensor, dist(a, mesh, "S(0)"), dist(b, mesh, "R"));
    EXPECT_DT(out, a * b, "S(0)");
  });
}

// ---------------------------------------------------------------------------
// The propagation cache: non-tensor arguments that matter are part of the key

TEST(DispatchTest, CacheSeparatesViewShapes) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({8, 5});
    DTensor x = dist(a, mesh, "S(0)");
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round);
      EXPECT_DT(x.tensor().view({-1}), a.view({-1}), "S(0)");
      EXPECT_DT(x.tensor().view({5, 8}), a.view({5, 8}));
      EXPECT_DT(x.tensor().view({40}), a.view({40}), "S(0)");
      EXPECT_DT(x.tensor().view({8, 5, 1}), a.view({8, 5, 1}), "S(0)");
    }
  });
}

TEST(DispatchTest, CacheSeparatesReductionDims) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({8, 5});
    DTensor x = dist(a, mesh, "S(0)");
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round);
      EXPECT_DT(x.tensor().sum(0), a.sum(0), "P(sum)");
      EXPECT_DT(x.tensor().sum(1), a.sum(1), "S(0)");
      EXPECT_DT(x.tensor().sum(1, /*keepdim=*/true), a.sum(1, true), "S(0)");
      EXPECT_DT(x.tensor().sum(0, /*keepdim=*/true), a.sum(0, true), "P(sum)");
    }
  });
}

TEST(DispatchTest, CacheSeparatesShapesAndArguments) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    // transpose(0, 1) on tensors of one layout but different shapes.
    at::Tensor a = iota({5, 3});
    at::Tensor b = iota({4, 6});
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round);
      EXPECT_DT(dist(a, mesh, "S(0)").tensor().transpose(0, 1), a.transpose(0, 1), "S(1)");
      EXPECT_DT(dist(b, mesh, "S(0)").tensor().transpose(0, 1), b.transpose(0, 1), "S(1)");
      EXPECT_DT(dist(b, mesh, "S(0)").tensor().transpose(1, 0), b.transpose(1, 0), "S(1)");
    }
    // slice of a sharded dim: the whole dim keeps the split, a part of it
    // must not reuse that answer.
    at::Tensor c = iota({5, 8});
    DTensor xc = dist(c, mesh, "S(1)");
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round);
      EXPECT_DT(xc.tensor().slice(1, 0, 8), c.slice(1, 0, 8), "S(1)");
      EXPECT_DT(xc.tensor().slice(1, 2, 6), c.slice(1, 2, 6));
      EXPECT_DT(xc.tensor().slice(1, 0, 8, 2), c.slice(1, 0, 8, 2));
    }
    // select with different indices, expand to different sizes.
    DTensor xr = dist(c, mesh, "S(1)");
    EXPECT_DT(xr.tensor().select(0, 1), c.select(0, 1), "S(0)");
    EXPECT_DT(xr.tensor().select(0, 4), c.select(0, 4), "S(0)");
    at::Tensor col = iota({1, 8});
    DTensor xcol = dist(col, mesh, "S(1)");
    EXPECT_DT(xcol.tensor().expand({4, 8}), col.expand({4, 8}), "S(1)");
    EXPECT_DT(xcol.tensor().expand({2, 8}), col.expand({2, 8}), "S(1)");
    // Scalars of pointwise ops.
    EXPECT_DT(xr.tensor() * 2, c * 2, "S(1)");
    EXPECT_DT(xr.tensor() * 3, c * 3, "S(1)");
    EXPECT_DT(at::add(xr, xr, 2), at::add(c, c, 2), "S(1)");
    EXPECT_DT(at::add(xr, xr, -1), at::add(c, c, -1), "S(1)");
  });
}

TEST(DispatchTest, CacheCapacityDefaultsTo4096AndRefusesZero) {
  EXPECT_EQ(kDefaultPropagationCacheCapacity, 4096);
  EXPECT_EQ(propagation_cache_capacity(), kDefaultPropagationCacheCapacity);
  DTENSOR_EXPECT_ERROR(set_propagation_cache_capacity(0),
                       "cache capacity: expected at least 1 entry, found 0");
  EXPECT_EQ(propagation_cache_capacity(), kDefaultPropagationCacheCapacity);
}

// More distinct calls than the cache holds: it never holds more than its
// capacity, and calls propagated again after their eviction give exactly
// what they gave before.
TEST(DispatchTest, CacheIsBoundedAndEvictedCallsComeBackExact) {
  const testing::ScopedCacheCapacity two(propagation_cache_capacity, set_propagation_cache_capacity,
                                         2);
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = iota({8, 5});
    const DTensor x = dist(a, mesh, "S(0)");
    for (int round = 0; round < 2; ++round) {
      SCOPED_TRACE(round);
      EXPECT_DT(x.tensor().view({-1}), a.view({-1}), "S(0)");
      EXPECT_LE(propagation_cache_size(), 2);
      EXPECT_DT(x.tensor().sum(0), a.sum(0), "P(sum)");
      EXPECT_LE(propagation_cache_size(), 2);
      EXPECT_DT(x.tensor().sum(1), a.sum(1), "S(0)");
      EXPECT_LE(propagation_cache_size(), 2);
      EXPECT_DT(x.tensor().transpose(0, 1), a.transpose(0, 1), "S(1)");
      EXPECT_LE(propagation_cache_size(), 2);
      EXPECT_DT(x.tensor() * 2, a * 2, "S(0)");
      EXPECT_EQ(propagation_cache_size(), 2);
    }
  });
}

// clear_propagation_cache empties every thread's cache, not only the caller's.
TEST(DispatchTest, ClearPropagationCacheEmptiesEveryRanksCache) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = iota({8, 5});
    EXPECT_DT(dist(a, mesh, "S(0)").tensor() * 2, a * 2, "S(0)");
    EXPECT_GE(propagation_cache_size(), 1);
    mesh.world()->barrier();
    if (rank == 0) clear_propagation_cache();
    mesh.world()->barrier();
    EXPECT_EQ(propagation_cache_size(), 0);
  });
}

// ---------------------------------------------------------------------------
// Changing the registry at run time

// Restores what `registry` holds under `key` when it goes out of scope.
template <typename Value>
class Restore {
 public:
  Restore(Registry<Value>& registry, std::string key)
      : registry_(registry), key_(std::move(key)), saved_(registry.find(key_)) {}
  ~Restore() {
    registry_.remove(key_);
    if (saved_ == nullptr) return;
    for (const Value& value : *saved_) registry_.add(key_, value);
  }

 private:
  Registry<Value>& registry_;
  std::string key_;
  std::shared_ptr<const std::vector<Value>> saved_;
};

// Restores the strategies and the local kernel of `op_name`.
struct RestoreRules {
  explicit RestoreRules(const std::string& op_name)
      : strategies_(strategies(), op_name), kernel_(local_kernels(), op_name) {}
  Restore<Strategy> strategies_;
  Restore<LocalKernel> kernel_;
};

// neg(max of terms) = min of the negated terms: a true rule that the built-in
// (additive) rule of neg does not offer.
Strategy neg_swaps_max_and_min() {
  Strategy strategy;
  strategy.rows = [](const OpCall& call, int64_t m) {
    std::vector<ShardingRow> rows;
    const PlacementPtr& p = call.placement(0, m);
    if (p->partial_op() == ReduceOp::kMax) {
      rows.push_back({{p}, {Partial::make(ReduceOp::kMin)}});
    } else if (p->partial_op() == ReduceOp::kMin) {
      rows.push_back({{p}, {Partial::make(ReduceOp::kMax)}});
    }
    rows.push_back({{Replicate::make()}, {Replicate::make()}});
    return rows;
  };
  return strategy;
}

// Partial(max) terms of `global`: rank r holds global - 10 r.
DTensor partial_max_terms(const at::Tensor& global, const DeviceMesh& mesh) {
  const int64_t rank = mesh.coordinate()[0];
  return from_local(global - 10 * rank, mesh, parse_placements("P(max)"));
}

TEST(DispatchTest, AddedRuleJoinsTheBuiltInStrategies) {
  RestoreRules restore("aten::neg");
  const at::Tensor a = signed_iota({5, 3});
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    ScopedStrictMode strict;
    // Before: neg of a Partial(max) needs a reduction.
    DTENSOR_EXPECT_ERROR(at::neg(partial_max_terms(a, mesh)), "strict mode");
  });
  strategies().add("aten::neg", neg_swaps_max_and_min());
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    ScopedStrictMode strict;
    EXPECT_DT(at::neg(partial_max_terms(a, mesh)), -a, "P(min)");
    // The built-in rows are still there.
    EXPECT_DT(at::neg(dist(a, mesh, "S(0)")), -a, "S(0)");
    EXPECT_DT(at::neg(partial_sum_terms(a, mesh)), -a, "P(sum)");
  });
}

TEST(DispatchTest, OverriddenRuleReplacesTheBuiltInStrategies) {
  const at::Tensor a = signed_iota({5, 3});
  {
    RestoreRules restore("aten::neg");
    strategies().override("aten::neg", neg_swaps_max_and_min());
    run_ranks(4, [&](int) {
      DeviceMesh mesh = init_device_mesh("local", {4});
      EXPECT_DT(at::neg(partial_max_terms(a, mesh)), -a, "P(min)");
      // The built-in pass-through of S(0) is gone: the input is gathered.
      {
        ScopedStrictMode strict;
        DTENSOR_EXPECT_ERROR(at::neg(dist(a, mesh, "S(0)")), "strict mode");
      }
      EXPECT_DT(at::neg(dist(a, mesh, "S(0)")), -a, "R");
    });
  }
  // Restored: the built-in rule again, and the override's row is gone.
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    ScopedStrictMode strict;
    EXPECT_DT(at::neg(dist(a, mesh, "S(0)")), -a, "S(0)");
    DTENSOR_EXPECT_ERROR(at::neg(partial_max_terms(a, mesh)), "strict mode");
  });
}

// cumsum along `dim` passes a split of any other dim.
Strategy cumsum_strategy() {
  Strategy strategy;
  strategy.rows = [](const OpCall& call, int64_t m) {
    const int64_t ndim = call.input(0).spec->ndim();
    int64_t dim = call.argument(1).toInt();
    if (dim < 0) dim += ndim;
    std::vector<ShardingRow> rows;
    const PlacementPtr& p = call.placement(0, m);
    const std::optional<int64_t> split = p->split_dim();
    if (split && *split != dim && p->fills_role(RuleRole::kPassThrough)) {
      rows.push_back({{p}, {p}});
    }
    rows.push_back({{Replicate::make()}, {Replicate::make()}});
    return rows;
  };
  strategy.output_shapes = [](const OpCall& call) {
    return std::vector<std::vector<int64_t>>{call.input(0).spec->shape()};
  };
  return strategy;
}

TEST(DispatchTest, RuleForAnOpWithoutOneMakesItWork) {
  ASSERT_EQ(strategies().find("aten::cumsum"), nullptr);
  const at::Tensor a = iota({5, 7});
  // The fallback result of a first call must not outlive the registration.
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    ScopedReplicateFallback fallback;
    EXPECT_DT(at::cumsum(dist(a, mesh, "S(0)"), 1), at::cumsum(a, 1));
  });
  {
    RestoreRules restore("aten::cumsum");
    strategies().add("aten::cumsum", cumsum_strategy());
    run_ranks(4, [&](int) {
      DeviceMesh mesh = init_device_mesh("local", {4});
      {
        ScopedStrictMode strict;
        EXPECT_DT(at::cumsum(dist(a, mesh, "S(0)"), 1), at::cumsum(a, 1), "S(0)");
        EXPECT_DT(at::cumsum(dist(a, mesh, "S(0)"), -1), at::cumsum(a, -1), "S(0)");
      }
      EXPECT_DT(at::cumsum(dist(a, mesh, "S(1)"), 1), at::cumsum(a, 1), "R");
    });
    run_ranks(4, [&](int) {
      DeviceMesh mesh = init_device_mesh("local", {2, 2});
      ScopedStrictMode strict;
      EXPECT_DT(at::cumsum(dist(a, mesh, "S(0),S(0)"), 1), at::cumsum(a, 1), "S(0),S(0)");
    });
  }
  EXPECT_EQ(strategies().find("aten::cumsum"), nullptr);
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    DTENSOR_EXPECT_ERROR(at::cumsum(dist(a, mesh, "S(0)"), 1), "no sharding rule");
  });
}

// A local kernel runs for every layout the engine chooses for its op: the
// strategy's own rows (cumsum along dim 1 of rows split on dim 0) and the
// engine's all-Replicate row alike.
// cumsum along dim 1 keeps a split of dim 0 (the built-in rule gathers).
Strategy cumsum_along_rows_keeps_their_split() {
  Strategy strategy;
  strategy.rows = [](const OpCall& call, int64_t m) {
    std::vector<ShardingRow> rows;
    const PlacementPtr& p = call.placement(0, m);
    if (p->split_dim() == 0 && call.argument(1).toInt() == 1) rows.push_back({{p}, {p}});
    return rows;
  };
  strategy.output_shapes = cumsum_strategy().output_shapes;
  return strategy;
}

TEST(DispatchTest, LocalKernelRunsForEveryLayoutOfItsOp) {
  RestoreRules restore("aten::cumsum");
  std::atomic<int> kernel_runs{0};
  strategies().add("aten::cumsum", cumsum_along_rows_keeps_their_split());
  local_kernels().add(
      "aten::cumsum",
      [&kernel_runs](const c10::OperatorHandle& op, torch::jit::Stack& stack, const LocalContext&) {
        ++kernel_runs;
        op.callBoxed(stack);
      });
  DTENSOR_EXPECT_ERROR(local_kernels().add("aten::cumsum", nullptr),
                       "local kernel registry: \"aten::cumsum\": expected one value per key, "
                       "found one registered already (override it to replace it)");
  const at::Tensor a = iota({5, 7});
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    EXPECT_DT(at::cumsum(dist(a, mesh, "S(0)"), 1), at::cumsum(a, 1), "S(0)");
  });
  EXPECT_EQ(kernel_runs.load(), 4);
  run_ranks(4, [&](int) {
    DeviceMesh line = init_device_mesh("local", {4});
    EXPECT_DT(at::cumsum(dist(a, line, "S(1)"), 1), at::cumsum(a, 1), "R");
    EXPECT_DT(at::cumsum(dist(a, line, "S(0)"), 0), at::cumsum(a, 0), "R");
    // The strategy's row on one mesh dim and the engine's on the other.
    DeviceMesh square = init_device_mesh("local", {2, 2});
    EXPECT_DT(at::cumsum(dist(a, square, "S(0),S(1)"), 1), at::cumsum(a, 1), "S(0),R");
  });
  EXPECT_EQ(kernel_runs.load(), 16);
}

// A propagation evicted while its op still runs (its local kernel runs other
// ops on DTensors, and the cache holds one result) stays valid for that op.
TEST(DispatchTest, APropagationInUseSurvivesItsEviction) {
  RestoreRules restore("aten::cumsum");
  const testing::ScopedCacheCapacity one(propagation_cache_capacity, set_propagation_cache_capacity,
                                         1);
  strategies().add("aten::cumsum", cumsum_along_rows_keeps_their_split());
  local_kernels().add("aten::cumsum", [](const c10::OperatorHandle& op, torch::jit::Stack& stack,
                                         const LocalContext& context) {
    const at::Tensor b = iota({4, 3});
    const DTensor nested = dist(b, context.mesh(), "S(0)");
    EXPECT_DT(nested.tensor() * 2, b * 2, "S(0)");
    EXPECT_DT(at::neg(nested.tensor()), at::neg(b), "S(0)");
    EXPECT_EQ(propagation_cache_size(), 1);
    op.callBoxed(stack);
  });
  const at::Tensor a = iota({5, 7});
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (int round = 0; round < 2; ++round) {
      EXPECT_DT(at::cumsum(dist(a, mesh, "S(0)"), 1), at::cumsum(a, 1), "S(0)");
    }
  });
}

}  // namespace
}  // namespace dtensor
