// Copyright 2026 The dtensor Authors.
//
// The built-in rule families (rules/families/) through plain ATen calls on
// DTensors: every result equals the single-device result exactly, on a 1-D
// mesh of 4 ranks and a (2, 2) mesh, with even shapes and uneven ones (5 or
// 7 over 4 ranks, where a rank may hold nothing); output placements are
// checked where the design fixes them.
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/dispatch/dispatch.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include "tests/rules/rules_test_util.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using rules_testing::dist;
using rules_testing::error_of;
using rules_testing::iota;
using rules_testing::placements_of;
using rules_testing::signed_iota;

// Whether no placement of `t` is Partial.
bool none_partial(const at::Tensor& t) {
  const DTensor d(t);
  for (const PlacementPtr& p : d.placements()) {
    if (p->is_partial()) return false;
  }
  return true;
}

// Partial(sum) terms of `global` on a 1-D mesh that differ from the value on
// every rank: a kernel run on unreduced terms gives a visibly wrong answer.
DTensor partial_sum_terms(const at::Tensor& global, const DeviceMesh& mesh) {
  const int64_t n = mesh.shape()[0];
  const int64_t rank = mesh.coordinate()[0];
  at::Tensor local = rank == 0 ? global + 30 * (n - 1) : at::full_like(global, -30);
  return from_local(local, mesh, parse_placements("P(sum)"));
}

// ===========================================================================
// Pointwise

TEST(PointwiseRulesTest, UnaryKeepsEverySplit1D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 4}, {5, 7}, {1, 3}}) {
      at::Tensor a = signed_iota(shape);
      for (const char* p : {"R", "S(0)", "S(1)"}) {
        SCOPED_TRACE(::testing::Message() << p << " " << a.sizes());
        ScopedStrictMode strict;
        EXPECT_DT(at::relu(dist(a, mesh, p)), at::relu(a), p);
        EXPECT_DT(at::neg(dist(a, mesh, p)), at::neg(a), p);
        EXPECT_DT(at::abs(dist(a, mesh, p)), at::abs(a), p);
        EXPECT_DT(at::clamp(dist(a, mesh, p), -3, 4), at::clamp(a, -3, 4), p);
      }
    }
  });
}

TEST(PointwiseRulesTest, UnaryKeepsEverySplit2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 4}, {5, 7}, {3, 1}}) {
      at::Tensor a = signed_iota(shape);
      for (const char* p : {"R,R", "S(0),S(1)", "S(1),S(0)", "S(0),S(0)", "R,S(1)"}) {
        SCOPED_TRACE(::testing::Message() << p << " " << a.sizes());
        ScopedStrictMode strict;
        EXPECT_DT(at::relu(dist(a, mesh, p)), at::relu(a), p);
        EXPECT_DT(at::abs(dist(a, mesh, p)), at::abs(a), p);
      }
    }
  });
}

TEST(PointwiseRulesTest, BinarySameLayout) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = signed_iota({5, 7});
    at::Tensor b = iota({5, 7}, 3);
    for (const char* p : {"R", "S(0)", "S(1)"}) {
      SCOPED_TRACE(p);
      ScopedStrictMode strict;
      DTensor da = dist(a, mesh, p), db = dist(b, mesh, p);
      EXPECT_DT(at::add(da, db), a + b, p);
      EXPECT_DT(at::sub(da, db), a - b, p);
      EXPECT_DT(at::mul(da, db), a * b, p);
      EXPECT_DT(at::maximum(da, db), at::maximum(a, b), p);
      EXPECT_DT(at::gt(da, db), at::gt(a, b), p);
      EXPECT_DT(at::add(da, db, 3), at::add(a, b, 3), p);
    }
  });
}

TEST(PointwiseRulesTest, BinaryDifferentLayoutsAreRedistributed) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = signed_iota({5, 7});
    at::Tensor b = iota({5, 7}, 3);
    EXPECT_DT(at::add(dist(a, mesh, "S(0)"), dist(b, mesh, "S(1)")), a + b);
    EXPECT_DT(at::mul(dist(a, mesh, "R"), dist(b, mesh, "S(1)")), a * b, "S(1)");
    EXPECT_DT(at::sub(dist(a, mesh, "S(1)"), dist(b, mesh, "R")), a - b, "S(1)");
  });
}

TEST(PointwiseRulesTest, Broadcasting1D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 4}, {5, 7}}) {
      const int64_t n = shape[0], h = shape[1];
      SCOPED_TRACE(::testing::Message() << n << "x" << h);
      at::Tensor x = signed_iota(shape);
      at::Tensor bias = iota({h}, -2);
      at::Tensor scale = iota({n, 1}, 1);
      ScopedStrictMode strict;
      // [N,H] + [H]: the bias is Replicate for a row split, split along with H.
      EXPECT_DT(at::add(dist(x, mesh, "S(0)"), dist(bias, mesh, "R")), x + bias, "S(0)");
      EXPECT_DT(at::add(dist(x, mesh, "S(1)"), dist(bias, mesh, "S(0)")), x + bias, "S(1)");
      EXPECT_DT(at::add(dist(bias, mesh, "S(0)"), dist(x, mesh, "S(1)")), bias + x, "S(1)");
      // [N,1] * [N,H].
      EXPECT_DT(at::mul(dist(scale, mesh, "S(0)"), dist(x, mesh, "S(0)")), scale * x, "S(0)");
      EXPECT_DT(at::mul(dist(scale, mesh, "R"), dist(x, mesh, "S(1)")), scale * x, "S(1)");
    }
  });
}

TEST(PointwiseRulesTest, BroadcastingNeedsRedistribution) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor x = signed_iota({5, 7});
    at::Tensor bias = iota({7}, -2);
    at::Tensor scale = iota({5, 1}, 1);
    // A bias split along H with x split along N: one of them moves.
    EXPECT_DT(at::add(dist(x, mesh, "S(0)"), dist(bias, mesh, "S(0)")), x + bias);
    // [N,1] split on its size-1 dim... of a broadcast operand never passes.
    EXPECT_DT(at::mul(dist(scale, mesh, "S(1)"), dist(x, mesh, "S(1)")), scale * x);
  });
}

TEST(PointwiseRulesTest, Broadcasting2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 4}, {5, 7}}) {
      const int64_t n = shape[0], h = shape[1];
      SCOPED_TRACE(::testing::Message() << n << "x" << h);
      at::Tensor x = signed_iota(shape);
      at::Tensor bias = iota({h}, -2);
      at::Tensor scale = iota({n, 1}, 1);
      ScopedStrictMode strict;
      EXPECT_DT(at::add(dist(x, mesh, "S(0),S(1)"), dist(bias, mesh, "R,S(0)")), x + bias,
                "S(0),S(1)");
      EXPECT_DT(at::mul(dist(x, mesh, "S(0),S(1)"), dist(scale, mesh, "S(0),R")), x * scale,
                "S(0),S(1)");
    }
  });
}

TEST(PointwiseRulesTest, TypePromotion) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor i = iota({5, 3}, -4, at::kLong);
    at::Tensor half = at::scalar_tensor(0.5, at::kFloat);
    DTensor di = dist(i, mesh, "S(0)");
    at::Tensor sum = at::add(di, half);
    EXPECT_EQ(sum.scalar_type(), at::kFloat);
    EXPECT_DT(sum, at::add(i, half), "S(0)");
    EXPECT_DT(at::mul(di, half), at::mul(i, half), "S(0)");
    EXPECT_DT(di.tensor() * 2.5, i * 2.5, "S(0)");
    // int64 + float DTensors of one layout.
    at::Tensor f = iota({5, 3}, 1, at::kFloat);
    EXPECT_DT(at::add(di, dist(f, mesh, "S(0)")), i + f, "S(0)");
    // int64 + int64 stays int64; comparisons give bool.
    EXPECT_DT(at::add(di, di), i + i, "S(0)");
    EXPECT_DT(at::lt(di, at::scalar_tensor(0, at::kLong)), i < 0, "S(0)");
  });
}

TEST(PointwiseRulesTest, PartialLinearity1D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = signed_iota({5, 3});
    at::Tensor b = iota({5, 3}, 2);
    {
      ScopedStrictMode strict;
      EXPECT_DT(at::add(partial_sum_terms(a, mesh), partial_sum_terms(b, mesh)), a + b, "P(sum)");
      EXPECT_DT(at::sub(partial_sum_terms(a, mesh), partial_sum_terms(b, mesh)), a - b, "P(sum)");
      EXPECT_DT(at::neg(partial_sum_terms(a, mesh)), -a, "P(sum)");
      EXPECT_DT(at::mul(partial_sum_terms(a, mesh), dist(b, mesh, "R")), a * b, "P(sum)");
      EXPECT_DT(at::mul(dist(b, mesh, "R"), partial_sum_terms(a, mesh)), b * a, "P(sum)");
      EXPECT_DT(partial_sum_terms(a, mesh).tensor() * 3, a * 3, "P(sum)");
      EXPECT_DT(at::div(partial_sum_terms(a, mesh), 2), a / 2, "P(sum)");
    }
    // Not linear: the Partial is reduced before the kernel runs.
    at::Tensor r = at::relu(partial_sum_terms(a, mesh));
    EXPECT_DT(r, at::relu(a));
    EXPECT_TRUE(none_partial(r)) << placements_of(r);
    EXPECT_DT(at::abs(partial_sum_terms(a, mesh)), at::abs(a));
    // Partial * Partial is not a Partial of anything.
    EXPECT_DT(at::mul(partial_sum_terms(a, mesh), partial_sum_terms(b, mesh)), a * b);
    // Partial + Replicate: the Replicate operand is added once, not n times.
    EXPECT_DT(at::add(partial_sum_terms(a, mesh), dist(b, mesh, "R")), a + b);
    EXPECT_DT(partial_sum_terms(a, mesh).tensor() + 1, a + 1);
    // Partial(max) passes through maximum.
    DTensor pm1 = from_local(a - 5 * mesh.coordinate()[0], mesh, parse_placements("P(max)"));
    DTensor pm2 = from_local(b - 7 * mesh.coordinate()[0], mesh, parse_placements("P(max)"));
    EXPECT_DT(at::maximum(pm1, pm2), at::maximum(a, b), "P(max)");
    // ...but not through add.
    DTensor pm3 = from_local(a - 5 * mesh.coordinate()[0], mesh, parse_placements("P(max)"));
    EXPECT_DT(at::add(pm3, pm3), a + a);
  });
}

// Filling with zero (masked_fill's backward) and joining (cat, stack) keep
// terms of a pending sum; filling with anything else does not.
TEST(PointwiseRulesTest, ZeroFillAndJoinsKeepAPartial) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = signed_iota({4, 3});
    const at::Tensor b = iota({4, 3}, 5);
    const at::Tensor mask = iota({4, 3}).remainder(3).eq(0);
    const DTensor whole_mask = dist(mask, mesh, "R");
    {
      ScopedStrictMode strict;
      EXPECT_DT(partial_sum_terms(a, mesh).tensor().masked_fill(whole_mask, 0.0),
                a.masked_fill(mask, 0.0), "P(sum)");
      EXPECT_DT(at::cat({partial_sum_terms(a, mesh), partial_sum_terms(b, mesh)}, 1),
                at::cat({a, b}, 1), "P(sum)");
      EXPECT_DT(at::stack({partial_sum_terms(a, mesh), partial_sum_terms(b, mesh)}),
                at::stack({a, b}), "P(sum)");
    }
    // -1 on every rank would count n times: reduced first.
    EXPECT_DT(partial_sum_terms(a, mesh).tensor().masked_fill(whole_mask, -1.0),
              a.masked_fill(mask, -1.0), "R");
    // Terms of different reductions do not join.
    DTensor pm = from_local(b - 7 * mesh.coordinate()[0], mesh, parse_placements("P(max)"));
    EXPECT_DT(at::cat({partial_sum_terms(a, mesh), pm}, 1), at::cat({a, b}, 1));
  });
}

// copy_ keeps a Partial only where the conversion sums alike: float terms
// 0.5 + 0.5 copied into int64 terms would truncate to 0 + 0.
TEST(PointwiseRulesTest, CopyBetweenDtypesKeepsAPartialOnlyFromFloatToFloat) {
  run_ranks(2, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2});
    const DTensor halves = from_local(at::full({3}, 0.5), mesh, parse_placements("P(sum)"));
    at::Tensor integers =
        from_local(at::zeros({3}, at::kLong), mesh, parse_placements("P(sum)")).tensor();
    EXPECT_CONTAINS(error_of([&] { integers.copy_(halves.tensor()); }),
                    "aten::copy_: no strategy keeps the layout of the tensor written in place");
    at::Tensor replicated =
        distribute_tensor(at::zeros({3}, at::kLong), mesh, parse_placements("R")).tensor();
    EXPECT_DT(replicated.copy_(halves.tensor()), at::ones({3}, at::kLong), "R");
    at::Tensor doubles =
        from_local(at::zeros({3}, at::kDouble), mesh, parse_placements("P(sum)")).tensor();
    EXPECT_DT(doubles.copy_(halves.tensor()), at::ones({3}, at::kDouble), "P(sum)");
  });
}

TEST(PointwiseRulesTest, PartialLinearity2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = signed_iota({5, 7});
    at::Tensor b = iota({5, 7}, 2);
    {
      ScopedStrictMode strict;
      EXPECT_DT(at::add(dist(a, mesh, "P(sum),S(0)"), dist(b, mesh, "P(sum),S(0)")), a + b,
                "P(sum),S(0)");
      EXPECT_DT(at::mul(dist(a, mesh, "S(1),P(sum)"), dist(b, mesh, "S(1),R")), a * b,
                "S(1),P(sum)");
    }
    at::Tensor r = at::relu(dist(a, mesh, "P(sum),S(1)"));
    EXPECT_DT(r, at::relu(a));
    EXPECT_TRUE(none_partial(r)) << placements_of(r);
  });
}

TEST(PointwiseRulesTest, StridedShardAndRaggedPassThrough) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = signed_iota({9, 3});
    at::Tensor b = iota({9, 3}, 5);
    at::Tensor bias = iota({3}, -1);
    for (const char* p : {"SS(0,2)", "SS(1,2)", "RG(dims=1,units=[1,2,1,0])",
                          "RG(dims=1,units=[0,0,1,0])", "RG(dims=1,units=[3,1,0,5])"}) {
      SCOPED_TRACE(p);
      ScopedStrictMode strict;
      DTensor da = dist(a, mesh, p), db = dist(b, mesh, p);
      EXPECT_DT(at::relu(da), at::relu(a), p);
      EXPECT_DT(at::add(da, db), a + b, p);
      EXPECT_DT(at::mul(da, db), a * b, p);
      EXPECT_DT(da.tensor() * 2, a * 2, p);
    }
    // A broadcast bias is Replicate beside a row split.
    for (const char* p : {"SS(0,2)", "RG(dims=1,units=[1,2,1,0])"}) {
      SCOPED_TRACE(p);
      ScopedStrictMode strict;
      EXPECT_DT(at::add(dist(a, mesh, p), dist(bias, mesh, "R")), a + bias, p);
    }
    // Ragged over two leading dims.
    at::Tensor c = signed_iota({3, 4, 2});
    {
      ScopedStrictMode strict;
      const char* p = "RG(dims=2,units=[3,1,0,1])";
      EXPECT_DT(at::relu(dist(c, mesh, p)), at::relu(c), p);
      EXPECT_DT(at::add(dist(c, mesh, p), dist(c, mesh, p)), c + c, p);
    }
  });
}

TEST(PointwiseRulesTest, StridedShardPassesThrough2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = signed_iota({9, 4});
    at::Tensor b = iota({9, 4}, 5);
    for (const char* p : {"SS(0,2),S(0)", "S(1),SS(0,3)"}) {
      SCOPED_TRACE(p);
      ScopedStrictMode strict;
      EXPECT_DT(at::relu(dist(a, mesh, p)), at::relu(a), p);
      EXPECT_DT(at::add(dist(a, mesh, p), dist(b, mesh, p)), a + b, p);
    }
  });
}

// ===========================================================================
// Matrix products

TEST(MatmulRulesTest, MmPlacements1D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    // Even, then uneven (7 rows, 5 inner, 6 cols over 4 ranks: 2,2,2,1 / 2,2,1,0 / 2,2,2,0).
    for (const std::vector<int64_t>& mkn : {std::vector<int64_t>{8, 4, 8}, {7, 5, 6}, {3, 2, 5}}) {
      const int64_t m = mkn[0], k = mkn[1], n = mkn[2];
      SCOPED_TRACE(::testing::Message() << m << "x" << k << "x" << n);
      at::Tensor a = signed_iota({m, k});
      at::Tensor w = iota({k, n}, -3);
      at::Tensor expected = at::mm(a, w);
      ScopedStrictMode strict;
      EXPECT_DT(at::mm(dist(a, mesh, "S(0)"), dist(w, mesh, "R")), expected, "S(0)");
      EXPECT_DT(at::mm(dist(a, mesh, "R"), dist(w, mesh, "S(1)")), expected, "S(1)");
      EXPECT_DT(at::mm(dist(a, mesh, "S(1)"), dist(w, mesh, "S(0)")), expected, "P(sum)");
      EXPECT_DT(at::mm(dist(a, mesh, "R"), dist(w, mesh, "R")), expected, "R");
    }
  });
}

TEST(MatmulRulesTest, MmNeedingRedistribution) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = signed_iota({7, 5});
    at::Tensor w = iota({5, 6}, -3);
    at::Tensor expected = at::mm(a, w);
    EXPECT_DT(at::mm(dist(a, mesh, "S(1)"), dist(w, mesh, "R")), expected);
    EXPECT_DT(at::mm(dist(a, mesh, "S(0)"), dist(w, mesh, "S(1)")), expected);
    EXPECT_DT(at::mm(dist(a, mesh, "S(0)"), dist(w, mesh, "S(0)")), expected);
    EXPECT_DT(at::mm(partial_sum_terms(a, mesh), dist(w, mesh, "R")), expected, "P(sum)");
  });
}

TEST(MatmulRulesTest, MmPlacements2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const std::vector<int64_t>& mkn : {std::vector<int64_t>{8, 6, 4}, {5, 7, 3}}) {
      const int64_t m = mkn[0], k = mkn[1], n = mkn[2];
      SCOPED_TRACE(::testing::Message() << m << "x" << k << "x" << n);
      at::Tensor a = signed_iota({m, k});
      at::Tensor w = iota({k, n}, -3);
      at::Tensor expected = at::mm(a, w);
      ScopedStrictMode strict;
      EXPECT_DT(at::mm(dist(a, mesh, "S(0),S(1)"), dist(w, mesh, "R,S(0)")), expected,
                "S(0),P(sum)");
      EXPECT_DT(at::mm(dist(a, mesh, "S(0),R"), dist(w, mesh, "R,S(1)")), expected, "S(0),S(1)");
      EXPECT_DT(at::mm(dist(a, mesh, "S(1),S(1)"), dist(w, mesh, "S(0),S(0)")), expected,
                "P(sum),P(sum)");
    }
  });
}

TEST(MatmulRulesTest, Bmm) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (int64_t batch : {4, 5}) {
      SCOPED_TRACE(batch);
      at::Tensor a = signed_iota({batch, 3, 5});
      at::Tensor b = iota({batch, 5, 2}, -4);
      at::Tensor expected = at::bmm(a, b);
      ScopedStrictMode strict;
      EXPECT_DT(at::bmm(dist(a, mesh, "S(0)"), dist(b, mesh, "S(0)")), expected, "S(0)");
      EXPECT_DT(at::bmm(dist(a, mesh, "S(1)"), dist(b, mesh, "R")), expected, "S(1)");
      EXPECT_DT(at::bmm(dist(a, mesh, "S(2)"), dist(b, mesh, "S(1)")), expected, "P(sum)");
    }
    at::Tensor a = signed_iota({5, 3, 5});
    at::Tensor b = iota({5, 5, 2}, -4);
    EXPECT_DT(at::bmm(dist(a, mesh, "S(0)"), dist(b, mesh, "R")), at::bmm(a, b));
  });
}

TEST(MatmulRulesTest, Bmm2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = signed_iota({5, 3, 4});
    at::Tensor b = iota({5, 4, 2}, -4);
    ScopedStrictMode strict;
    EXPECT_DT(at::bmm(dist(a, mesh, "S(0),S(2)"), dist(b, mesh, "S(0),S(1)")), at::bmm(a, b),
              "S(0),P(sum)");
  });
}

TEST(MatmulRulesTest, AddmmMvDot) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = signed_iota({7, 5});
    at::Tensor w = iota({5, 6}, -3);
    at::Tensor bias = iota({6}, -2);
    at::Tensor bias2 = iota({7, 6}, -20);
    at::Tensor expected = at::addmm(bias, a, w);
    {
      ScopedStrictMode strict;
      EXPECT_DT(at::addmm(dist(bias, mesh, "R"), dist(a, mesh, "S(0)"), dist(w, mesh, "R")),
                expected, "S(0)");
      EXPECT_DT(at::addmm(dist(bias, mesh, "S(0)"), dist(a, mesh, "R"), dist(w, mesh, "S(1)")),
                expected, "S(1)");
      EXPECT_DT(at::addmm(dist(bias2, mesh, "S(0)"), dist(a, mesh, "S(0)"), dist(w, mesh, "R")),
                at::addmm(bias2, a, w), "S(0)");
    }
    // Contraction split: the bias must be added once.
    EXPECT_DT(at::addmm(dist(bias, mesh, "R"), dist(a, mesh, "S(1)"), dist(w, mesh, "S(0)")),
              expected);
    EXPECT_DT(at::addmm(dist(bias, mesh, "R"), dist(a, mesh, "S(1)"), dist(w, mesh, "S(0)"),
                        /*beta=*/2, /*alpha=*/3),
              at::addmm(bias, a, w, 2, 3));

    at::Tensor v = iota({5}, -2);
    {
      ScopedStrictMode strict;
      EXPECT_DT(at::mv(dist(a, mesh, "S(0)"), dist(v, mesh, "R")), at::mv(a, v), "S(0)");
      EXPECT_DT(at::mv(dist(a, mesh, "S(1)"), dist(v, mesh, "S(0)")), at::mv(a, v), "P(sum)");
    }
    for (int64_t len : {8, 7, 2}) {
      SCOPED_TRACE(len);
      at::Tensor x = signed_iota({len});
      at::Tensor y = iota({len}, 3);
      ScopedStrictMode strict;
      EXPECT_DT(at::dot(dist(x, mesh, "S(0)"), dist(y, mesh, "S(0)")), at::dot(x, y), "P(sum)");
      EXPECT_DT(at::dot(dist(x, mesh, "R"), dist(y, mesh, "R")), at::dot(x, y), "R");
    }
  });
}

TEST(MatmulRulesTest, MatmulAndLinear) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    // 2-D x 2-D.
    at::Tensor a = signed_iota({7, 5});
    at::Tensor w = iota({5, 6}, -3);
    EXPECT_DT(at::matmul(dist(a, mesh, "S(0)"), dist(w, mesh, "R")), at::matmul(a, w), "S(0)");
    EXPECT_DT(at::matmul(dist(a, mesh, "S(1)"), dist(w, mesh, "S(0)")), at::matmul(a, w), "P(sum)");
    // 3-D x 2-D: folded into one mm and back; even batch keeps the split.
    at::Tensor x3 = signed_iota({4, 5, 3});
    at::Tensor w3 = iota({3, 2}, -1);
    EXPECT_DT(at::matmul(dist(x3, mesh, "S(0)"), dist(w3, mesh, "R")), at::matmul(x3, w3), "S(0)");
    at::Tensor x3u = signed_iota({3, 5, 3});
    EXPECT_DT(at::matmul(dist(x3u, mesh, "S(0)"), dist(w3, mesh, "R")), at::matmul(x3u, w3));
    EXPECT_DT(at::matmul(dist(x3, mesh, "S(1)"), dist(w3, mesh, "R")), at::matmul(x3, w3));
    // Batched 3-D x 3-D, vector x matrix.
    at::Tensor y3 = iota({4, 3, 2}, -6);
    EXPECT_DT(at::matmul(dist(x3, mesh, "S(0)"), dist(y3, mesh, "S(0)")), at::matmul(x3, y3),
              "S(0)");
    at::Tensor v = iota({5}, -2);
    EXPECT_DT(at::matmul(dist(a, mesh, "S(0)"), dist(iota({5}, 1), mesh, "R")),
              at::matmul(a, iota({5}, 1)), "S(0)");
    EXPECT_DT(at::matmul(dist(v, mesh, "S(0)"), dist(a.t().contiguous(), mesh, "R")),
              at::matmul(v, a.t().contiguous()));

    // linear: y = x W^T + b.
    at::Tensor x = signed_iota({6, 4});
    at::Tensor weight = iota({3, 4}, -5);
    at::Tensor b = iota({3}, 1);
    at::Tensor expected = at::linear(x, weight, b);
    // Data parallel: rows of x.
    EXPECT_DT(at::linear(dist(x, mesh, "S(0)"), dist(weight, mesh, "R"), dist(b, mesh, "R")),
              expected, "S(0)");
    // Column parallel: output features.
    EXPECT_DT(at::linear(dist(x, mesh, "R"), dist(weight, mesh, "S(0)"), dist(b, mesh, "S(0)")),
              expected, "S(1)");
    // Row parallel: the contraction, the bias added once.
    EXPECT_DT(at::linear(dist(x, mesh, "S(1)"), dist(weight, mesh, "S(1)"), dist(b, mesh, "R")),
              expected);
    EXPECT_DT(at::linear(dist(x, mesh, "S(1)"), dist(weight, mesh, "S(1)")), at::linear(x, weight),
              "P(sum)");
    // 3-D input.
    at::Tensor x3l = signed_iota({4, 2, 4});
    EXPECT_DT(at::linear(dist(x3l, mesh, "S(0)"), dist(weight, mesh, "R"), dist(b, mesh, "R")),
              at::linear(x3l, weight, b));
  });
}

// ===========================================================================
// Reductions

TEST(ReductionRulesTest, Sum1D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 4}, {5, 7}}) {
      SCOPED_TRACE(::testing::Message() << shape[0] << "x" << shape[1]);
      at::Tensor a = signed_iota(shape);
      ScopedStrictMode strict;
      DTensor s0 = dist(a, mesh, "S(0)"), s1 = dist(a, mesh, "S(1)");
      // Over the sharded dim: Partial(sum).
      EXPECT_DT(s0.tensor().sum(0), a.sum(0), "P(sum)");
      EXPECT_DT(s0.tensor().sum(0, true), a.sum(0, true), "P(sum)");
      EXPECT_DT(s1.tensor().sum(1), a.sum(1), "P(sum)");
      // Over another dim: the split passes, renumbered without keepdim.
      EXPECT_DT(s0.tensor().sum(1), a.sum(1), "S(0)");
      EXPECT_DT(s0.tensor().sum(1, true), a.sum(1, true), "S(0)");
      EXPECT_DT(s1.tensor().sum(0), a.sum(0), "S(0)");
      EXPECT_DT(s1.tensor().sum(0, true), a.sum(0, true), "S(1)");
      EXPECT_DT(s1.tensor().sum(-2), a.sum(-2), "S(0)");
      // Everything.
      EXPECT_DT(s0.tensor().sum(), a.sum(), "P(sum)");
      EXPECT_DT(s1.tensor().sum(at::IntArrayRef{0, 1}), a.sum(at::IntArrayRef{0, 1}), "P(sum)");
      // A Partial(sum) input passes.
      EXPECT_DT(partial_sum_terms(a, mesh).tensor().sum(1), a.sum(1), "P(sum)");
    }
  });
}

TEST(ReductionRulesTest, Sum2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 4}, {5, 7}}) {
      SCOPED_TRACE(::testing::Message() << shape[0] << "x" << shape[1]);
      at::Tensor a = signed_iota(shape);
      ScopedStrictMode strict;
      DTensor d = dist(a, mesh, "S(0),S(1)");
      EXPECT_DT(d.tensor().sum(0), a.sum(0), "P(sum),S(0)");
      EXPECT_DT(d.tensor().sum(1, true), a.sum(1, true), "S(0),P(sum)");
      EXPECT_DT(d.tensor().sum(), a.sum(), "P(sum),P(sum)");
      EXPECT_DT(dist(a, mesh, "S(0),S(0)").tensor().sum(0), a.sum(0), "P(sum),P(sum)");
    }
  });
}

TEST(ReductionRulesTest, MeanIsExactOverUnevenSplits) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{8, 4}, {5, 7}, {3, 2}}) {
      SCOPED_TRACE(::testing::Message() << shape[0] << "x" << shape[1]);
      at::Tensor a = signed_iota(shape);
      DTensor s0 = dist(a, mesh, "S(0)"), s1 = dist(a, mesh, "S(1)");
      // Local sum / global count: Partial(sum).
      EXPECT_DT(s0.tensor().mean(0), a.mean(0), "P(sum)", 1e-6);
      EXPECT_DT(s0.tensor().mean(0, true), a.mean(0, true), "P(sum)", 1e-6);
      EXPECT_DT(s1.tensor().mean(1), a.mean(1), "P(sum)", 1e-6);
      EXPECT_DT(s0.tensor().mean(), a.mean(), "P(sum)", 1e-6);
      EXPECT_DT(s0.tensor().mean(1), a.mean(1), "S(0)", 1e-6);
      EXPECT_DT(s1.tensor().mean(0, true), a.mean(0, true), "S(1)", 1e-6);
    }
  });
}

// Nothing reduced is split: the op itself, bit for bit (a bfloat16 sum of 257
// ones rounds before or after the division depending on how it is done).
// Split: the terms sum and divide in float, then round once.
TEST(ReductionRulesTest, MeanOfHalfTypes) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor ones = at::ones({257}, at::kBFloat16);
    EXPECT_DT(dist(ones, mesh, "R").tensor().mean(), ones.mean(), "R");
    const at::Tensor a = signed_iota({6, 257}).div(7).to(at::kBFloat16);
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().mean(1), a.mean(1), "S(0)");
    EXPECT_DT(dist(a, mesh, "R").tensor().mean(-1, true), a.mean(-1, true), "R");
    EXPECT_DT(dist(a.to(at::kHalf), mesh, "S(0)").tensor().mean(1), a.to(at::kHalf).mean(1),
              "S(0)");
    // Each term rounds to bfloat16 before the sum: close, not equal.
    EXPECT_DT(dist(ones, mesh, "S(0)").tensor().mean(), at::ones({}, at::kBFloat16), "P(sum)",
              1e-2);
  });
}

TEST(ReductionRulesTest, Mean2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = signed_iota({5, 7});
    DTensor d = dist(a, mesh, "S(0),S(1)");
    EXPECT_DT(d.tensor().mean(0), a.mean(0), "P(sum),S(0)", 1e-6);
    EXPECT_DT(d.tensor().mean(1, true), a.mean(1, true), "S(0),P(sum)", 1e-6);
    EXPECT_DT(d.tensor().mean(), a.mean(), "P(sum),P(sum)", 1e-6);
  });
}

TEST(ReductionRulesTest, AmaxAndMax) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    // Even split, every shard non-empty: Partial(max).
    at::Tensor a = -iota({8, 4}, 3);  // all negative: an empty or zero term would show
    {
      ScopedStrictMode strict;
      DTensor s0 = dist(a, mesh, "S(0)");
      EXPECT_DT(at::amax(s0, {0}), at::amax(a, {0}), "P(max)");
      EXPECT_DT(at::amax(s0, {0}, true), at::amax(a, {0}, true), "P(max)");
      EXPECT_DT(at::amin(s0, {0}), at::amin(a, {0}), "P(min)");
      EXPECT_DT(at::amax(s0, {1}), at::amax(a, {1}), "S(0)");
      EXPECT_DT(at::amax(s0, {1}, true), at::amax(a, {1}, true), "S(0)");
      EXPECT_DT(at::max(s0), at::max(a), "P(max)");
      EXPECT_DT(at::min(s0), at::min(a), "P(min)");
    }
    // Uneven with an empty shard (5 over 4): still right.
    at::Tensor u = -iota({5, 7}, 3);
    DTensor u0 = dist(u, mesh, "S(0)"), u1 = dist(u, mesh, "S(1)");
    EXPECT_DT(at::amax(u0, {0}), at::amax(u, {0}));
    EXPECT_DT(at::amax(u0, {0}, true), at::amax(u, {0}, true));
    EXPECT_DT(at::amin(u0, {0}), at::amin(u, {0}));
    EXPECT_DT(at::max(u0), at::max(u));
    EXPECT_DT(at::min(u0), at::min(u));
    // 7 over 4 has no empty shard: Partial(max) again.
    EXPECT_DT(at::amax(u1, {1}), at::amax(u, {1}), "P(max)");
    EXPECT_DT(at::amax(u1, {0}), at::amax(u, {0}), "S(0)");
    EXPECT_DT(at::amax(u1, {0}, true), at::amax(u, {0}, true), "S(1)");
  });
}

TEST(ReductionRulesTest, Amax2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = signed_iota({5, 7});
    DTensor d = dist(a, mesh, "S(0),S(1)");
    EXPECT_DT(at::amax(d, {0}), at::amax(a, {0}), "P(max),S(0)");
    EXPECT_DT(at::amax(d, {1}, true), at::amax(a, {1}, true), "S(0),P(max)");
    EXPECT_DT(at::amax(d, {0, 1}), at::amax(a, {0, 1}), "P(max),P(max)");
  });
}

// Norms over a split dim combine each rank's part of sum |x|^p (max/min for
// +-inf) with one all-reduce: replicated results, the input never gathered
// (strict mode raises on any redistribution), empty shards included.
TEST(ReductionRulesTest, NormsOverASplitDimCombineWithoutGathering) {
  run_ranks(4, [](int) {
    const at::Tensor a = signed_iota({7, 3}).div(4);
    const double inf = std::numeric_limits<double>::infinity();
    for (const auto& [mesh_shape, placements, all_dims] :
         std::vector<std::tuple<std::vector<int64_t>, const char*, const char*>>{
             {{4}, "S(0)", "R"},
             {{4}, "S(1)", "R"},
             {{2, 2}, "S(0),S(1)", "R,R"},
             {{2, 2}, "S(1),S(0)", "R,R"}}) {
      SCOPED_TRACE(placements);
      DeviceMesh mesh = init_device_mesh("local", mesh_shape);
      const DTensor d = dist(a, mesh, placements);
      ScopedStrictMode strict;
      for (double p : {2.0, 1.0, 3.0, inf, -inf, 0.0}) {
        SCOPED_TRACE(p);
        EXPECT_DT(at::linalg_vector_norm(d, p), at::linalg_vector_norm(a, p), all_dims, 1e-5);
        EXPECT_DT(at::norm(d.tensor(), p), at::norm(a, p), all_dims, 1e-5);
      }
    }
    // Over one dim: the other dim's split passes through; keepdim keeps a size-1 dim.
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    ScopedStrictMode strict;
    EXPECT_DT(at::linalg_vector_norm(dist(a, mesh, "S(0),S(1)"), 2, std::vector<int64_t>{1}),
              at::linalg_vector_norm(a, 2, std::vector<int64_t>{1}), "S(0),R", 1e-5);
    EXPECT_DT(
        at::linalg_vector_norm(dist(a, mesh, "S(1),S(0)"), inf, std::vector<int64_t>{0}, true),
        at::linalg_vector_norm(a, inf, std::vector<int64_t>{0}, true), "S(1),R");
    // Integers have no norm, split or not (libtorch says so on whole inputs).
    const at::Tensor integers = at::arange(12, at::kLong).view({4, 3});
    EXPECT_CONTAINS(error_of([&] { at::norm(dist(integers, mesh, "S(0),S(1)").tensor()); }),
                    "expected a floating point or complex input for a norm, found Long");
  });
}

TEST(ReductionRulesTest, ArgmaxOverASplitDimIsGathered) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    // Distinct values with the maximum of each column in a different row.
    at::Tensor a = at::remainder(iota({5, 7}) * 3, 11) * 10 + iota({5, 7});
    for (const char* p : {"S(0)", "S(1)", "R"}) {
      SCOPED_TRACE(p);
      DTensor d = dist(a, mesh, p);
      EXPECT_DT(at::argmax(d, 0), at::argmax(a, 0));
      EXPECT_DT(at::argmax(d, 1), at::argmax(a, 1));
      EXPECT_DT(at::argmax(d, 0, true), at::argmax(a, 0, true));
      EXPECT_DT(at::argmin(d, 1), at::argmin(a, 1));
      at::Tensor r = at::argmax(d, 0);
      EXPECT_TRUE(none_partial(r)) << placements_of(r);
    }
    // Over an unsplit dim the split passes.
    EXPECT_DT(at::argmax(dist(a, mesh, "S(0)"), 1), at::argmax(a, 1), "S(0)");
  });
}

// ===========================================================================
// Views

TEST(ViewRulesTest, TransposeAndPermute) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 7});
    at::Tensor c = iota({4, 5, 3});
    ScopedStrictMode strict;
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().t(), a.t(), "S(1)");
    EXPECT_DT(dist(a, mesh, "S(1)").tensor().t(), a.t(), "S(0)");
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().transpose(0, 1), a.transpose(0, 1), "S(1)");
    EXPECT_DT(dist(c, mesh, "S(0)").tensor().transpose(0, 2), c.transpose(0, 2), "S(2)");
    EXPECT_DT(dist(c, mesh, "S(1)").tensor().transpose(-1, 0), c.transpose(-1, 0), "S(1)");
    EXPECT_DT(dist(c, mesh, "S(0)").tensor().permute({2, 0, 1}), c.permute({2, 0, 1}), "S(1)");
    EXPECT_DT(dist(c, mesh, "S(2)").tensor().permute({2, 0, 1}), c.permute({2, 0, 1}), "S(0)");
    EXPECT_DT(dist(a, mesh, "P(sum)").tensor().t(), a.t(), "P(sum)");
  });
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = iota({5, 7});
    ScopedStrictMode strict;
    EXPECT_DT(dist(a, mesh, "S(0),S(1)").tensor().t(), a.t(), "S(1),S(0)");
    EXPECT_DT(dist(a, mesh, "S(0),S(0)").tensor().t(), a.t(), "S(1),S(1)");
  });
}

TEST(ViewRulesTest, UnsqueezeSqueezeExpand) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 7});
    at::Tensor b = iota({5, 1, 7});
    at::Tensor col = iota({5, 1});
    at::Tensor row = iota({1, 7});
    ScopedStrictMode strict;
    EXPECT_DT(dist(a, mesh, "S(1)").tensor().unsqueeze(0), a.unsqueeze(0), "S(2)");
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().unsqueeze(1), a.unsqueeze(1), "S(0)");
    EXPECT_DT(dist(a, mesh, "S(1)").tensor().unsqueeze(-1), a.unsqueeze(-1), "S(1)");
    EXPECT_DT(dist(b, mesh, "S(2)").tensor().squeeze(1), b.squeeze(1), "S(1)");
    // squeeze of a dim that is not 1 keeps it.
    EXPECT_DT(dist(b, mesh, "S(2)").tensor().squeeze(0), b.squeeze(0), "S(2)");
    EXPECT_DT(dist(col, mesh, "S(0)").tensor().expand({5, 4}), col.expand({5, 4}), "S(0)");
    EXPECT_DT(dist(row, mesh, "S(1)").tensor().expand({3, 7}), row.expand({3, 7}), "S(1)");
    EXPECT_DT(dist(col, mesh, "S(0)").tensor().expand({2, 5, 4}), col.expand({2, 5, 4}), "S(1)");
    EXPECT_DT(dist(row, mesh, "S(1)").tensor().expand({-1, 7}), row.expand({-1, 7}), "S(1)");
  });
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    // Expanding a split size-1 dim is impossible without gathering.
    at::Tensor col = iota({5, 1});
    EXPECT_DT(dist(col, mesh, "S(1)").tensor().expand({5, 4}), col.expand({5, 4}));
  });
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor row = iota({1, 7});
    ScopedStrictMode strict;
    EXPECT_DT(dist(row, mesh, "R,S(1)").tensor().expand({3, 7}), row.expand({3, 7}), "R,S(1)");
    EXPECT_DT(dist(iota({5, 7}), mesh, "S(0),S(1)").tensor().unsqueeze(0),
              iota({5, 7}).unsqueeze(0), "S(1),S(2)");
  });
}

// squeeze() with no dim squeezes the GLOBAL size-1 dims: a rank whose shard
// of a split dim happens to hold one element must keep that dim. (One
// run_ranks per case: a rank failing alone would desynchronise the next.)
TEST(ViewRulesTest, SqueezeAllOfAnUnevenSplit) {
  const at::Tensor b = iota({5, 1, 7});  // dim 0: 2,2,1,0 rows; dim 2: 2,2,2,1 cols
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    EXPECT_DT(dist(b, mesh, "S(0)").tensor().squeeze(), b.squeeze(), "S(0)");
  });
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    EXPECT_DT(dist(b, mesh, "S(2)").tensor().squeeze(), b.squeeze(), "S(1)");
  });
  // Even split with one row per rank.
  const at::Tensor c = iota({4, 1, 3});
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    EXPECT_DT(dist(c, mesh, "S(0)").tensor().squeeze(), c.squeeze(), "S(0)");
  });
}

TEST(ViewRulesTest, SelectSliceSplit) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({5, 7});
    {
      ScopedStrictMode strict;
      EXPECT_DT(dist(a, mesh, "S(1)").tensor().select(0, 2), a.select(0, 2), "S(0)");
      EXPECT_DT(dist(a, mesh, "S(0)").tensor().select(1, -1), a.select(1, -1), "S(0)");
      EXPECT_DT(dist(a, mesh, "S(1)").tensor().slice(0, 1, 4), a.slice(0, 1, 4), "S(1)");
      EXPECT_DT(dist(a, mesh, "S(0)").tensor().slice(1, 2, 7, 2), a.slice(1, 2, 7, 2), "S(0)");
    }
    // Along the split dim: right values (gathered).
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().select(0, 3), a.select(0, 3));
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().select(0, 4), a.select(0, 4));
    EXPECT_DT(dist(a, mesh, "S(1)").tensor().slice(1, 1, 6), a.slice(1, 1, 6));
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().slice(0, 3, 5), a.slice(0, 3, 5));
    // Unbind and split.
    std::vector<at::Tensor> pieces = at::split(dist(iota({8, 6}), mesh, "S(0)"), 2, 1);
    std::vector<at::Tensor> expected = at::split(iota({8, 6}), 2, 1);
    ASSERT_EQ(pieces.size(), expected.size());
    for (size_t i = 0; i < pieces.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_DT(pieces[i], expected[i], "S(0)");
    }
    pieces = at::split(dist(a, mesh, "S(0)"), 2, 0);
    expected = at::split(a, 2, 0);
    ASSERT_EQ(pieces.size(), expected.size());
    for (size_t i = 0; i < pieces.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_DT(pieces[i], expected[i]);
    }
    pieces = at::unbind(dist(a, mesh, "S(1)"), 0);
    expected = at::unbind(a, 0);
    ASSERT_EQ(pieces.size(), expected.size());
    for (size_t i = 0; i < pieces.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_DT(pieces[i], expected[i], "S(0)");
    }
  });
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = iota({5, 7, 3});
    ScopedStrictMode strict;
    EXPECT_DT(dist(a, mesh, "S(0),S(1)").tensor().select(2, 1), a.select(2, 1), "S(0),S(1)");
    EXPECT_DT(dist(a, mesh, "S(2),S(0)").tensor().select(1, 1), a.select(1, 1), "S(1),S(0)");
  });
}

TEST(ViewRulesTest, ViewKeepsOrStridesTheSplit) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor a = iota({8, 4});
    at::Tensor b = iota({4, 8});
    {
      ScopedStrictMode strict;
      // Flattening rows split evenly: still row blocks.
      EXPECT_DT(dist(a, mesh, "S(0)").tensor().view({-1}), a.view({-1}), "S(0)");
      EXPECT_DT(dist(a, mesh, "S(0)").tensor().view({32}), a.view({32}), "S(0)");
      // Flattening a column split: each rank holds 2 of every 8: strided.
      EXPECT_DT(dist(b, mesh, "S(1)").tensor().view({-1}), b.view({-1}), "SS(0,4)");
      // Kept dims pass; a split dim cut into pieces passes to the first piece.
      EXPECT_DT(dist(a, mesh, "S(1)").tensor().view({8, 4, 1}), a.view({8, 4, 1}), "S(1)");
      EXPECT_DT(dist(b, mesh, "S(0)").tensor().view({4, 2, 4}), b.view({4, 2, 4}), "S(0)");
      EXPECT_DT(dist(b, mesh, "S(1)").tensor().view({4, 4, 2}), b.view({4, 4, 2}), "S(1)");
      EXPECT_DT(dist(a, mesh, "S(0)").tensor().view({4, 2, 4}), a.view({4, 2, 4}), "S(0)");
      // reshape and flatten decompose into view.
      EXPECT_DT(dist(a, mesh, "S(0)").tensor().reshape({-1}), a.reshape({-1}), "S(0)");
      EXPECT_DT(dist(a, mesh, "S(0)").tensor().flatten(), a.flatten(), "S(0)");
    }
    // The strided result round-trips back to [4, 8] S(1).
    at::Tensor flat = dist(b, mesh, "S(1)").tensor().view({-1});
    EXPECT_DT(flat.view({4, 8}), b);
  });
}

// Cutting a StridedShard dim into its blocks: each rank's piece of every
// block is a plain Shard of the next dim, with no communication, even or
// not; the merge that made the StridedShard round-trips (the batched matmul
// of head-sharded attention reshapes [B, H, ...] to [B*H, ...] and back).
TEST(ViewRulesTest, UnflatteningStridedBlocksKeepsAShard) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    ScopedStrictMode strict;
    at::Tensor a = iota({6, 4});
    EXPECT_DT(dist(a, mesh, "SS(0,2)").tensor().view({2, 3, 4}), a.view({2, 3, 4}), "S(1)");
    at::Tensor b = iota({16, 3});
    EXPECT_DT(dist(b, mesh, "SS(0,2)").tensor().view({2, 8, 3}), b.view({2, 8, 3}), "S(1)");
    EXPECT_DT(dist(b, mesh, "SS(0,2)").tensor().view({2, 4, 2, 3}), b.view({2, 4, 2, 3}), "S(1)");
    // 5 per block over 4 ranks: torch.chunk's uneven pieces, still exact.
    at::Tensor c = iota({10, 3});
    EXPECT_DT(dist(c, mesh, "SS(0,2)").tensor().view({2, 5, 3}), c.view({2, 5, 3}), "S(1)");
    at::Tensor heads = iota({2, 4, 3});
    const at::Tensor merged = dist(heads, mesh, "S(1)").tensor().view({8, 3});
    EXPECT_DT(merged, heads.view({8, 3}), "SS(0,2)");
    EXPECT_DT(merged.view({2, 4, 3}), heads, "S(1)");
  });
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    ScopedStrictMode strict;
    // Each rank's 4 of every block of 8 are the first or the second half of
    // the block's [2, 4] rows: a Shard of the 2-long dim after the blocks.
    at::Tensor b = iota({16, 3});
    EXPECT_DT(dist(b, mesh, "R,SS(0,2)").tensor().view({2, 2, 4, 3}), b.view({2, 2, 4, 3}),
              "R,S(1)");
    // A Shard on another mesh dim splits each rank's piece of the blocks
    // further: a Shard of the blocks' dim.
    at::Tensor a = iota({8, 3});
    EXPECT_DT(dist(a, mesh, "SS(0,2),S(0)").tensor().view({2, 4, 3}), a.view({2, 4, 3}),
              "S(1),S(0)");
    EXPECT_DT(dist(a, mesh, "R,SS(0,2)").tensor().view({2, 4, 3}), a.view({2, 4, 3}), "R,S(1)");
    // Nested even splits of one dim cut into several: each mesh dim takes
    // its own output dim (batch and heads of attention's [B*H, ...]).
    at::Tensor heads = iota({2, 4, 3});
    const at::Tensor merged = dist(heads, mesh, "S(0),S(1)").tensor().view({8, 3});
    EXPECT_DT(merged, heads.view({8, 3}), "S(0),S(0)");
    EXPECT_DT(merged.view({2, 4, 3}), heads, "S(0),S(1)");
    EXPECT_DT(dist(iota({8, 3}), mesh, "S(0),S(0)").tensor().view({4, 2, 3}),
              iota({8, 3}).view({4, 2, 3}), "S(0),S(0)");
  });
}

// A view that merges a StridedShard dim with its neighbours while cutting
// it keeps a StridedShard where each rank's elements are one (the columns'
// blocks strided by the rows); where they are not (blocks of unequal
// torch.chunk pieces, or pieces that no longer line up with the output's)
// the values are gathered, never laid out as a split of the wrong elements.
TEST(ViewRulesTest, RegroupingAStridedDimWithOthers) {
  run_ranks(2, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2});
    {
      ScopedStrictMode strict;
      EXPECT_DT(dist(iota({3, 4}), mesh, "SS(1,2)").tensor().view({2, 6}),
                iota({3, 4}).view({2, 6}), "SS(1,3)");
      EXPECT_DT(dist(iota({6, 4}), mesh, "SS(1,2)").tensor().view({2, 12}),
                iota({6, 4}).view({2, 12}), "SS(1,6)");
      EXPECT_DT(dist(iota({2, 12}), mesh, "SS(1,3)").tensor().view({3, 8}),
                iota({2, 12}).view({3, 8}), "SS(1,2)");
    }
    EXPECT_DT(dist(iota({4, 6}), mesh, "SS(0,3)").tensor().view({3, 8}), iota({4, 6}).view({3, 8}),
              "R");
    EXPECT_DT(dist(iota({6, 4}), mesh, "SS(0,2)").tensor().view({2, 12}),
              iota({6, 4}).view({2, 12}), "R");
  });
}

TEST(ViewRulesTest, ViewThatCannotKeepTheSplitGathers) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    // 5 rows over 4: the blocks do not survive flattening.
    at::Tensor a = iota({5, 4});
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().view({-1}), a.view({-1}));
    EXPECT_DT(dist(a, mesh, "S(0)").tensor().view({2, 10}), a.view({2, 10}));
    // 6 columns over 4 ranks (2, 2, 2, 0) cut into [2, 3].
    at::Tensor c = iota({4, 6});
    EXPECT_DT(dist(c, mesh, "S(1)").tensor().view({4, 2, 3}), c.view({4, 2, 3}));
    // Splitting 8 into (2, 4): the first piece (2) cannot hold 4 blocks.
    at::Tensor b = iota({4, 8});
    EXPECT_DT(dist(b, mesh, "S(1)").tensor().view({4, 2, 4}), b.view({4, 2, 4}));
    // Strided input: flattening SS.
    EXPECT_DT(dist(b, mesh, "SS(0,2)").tensor().view({-1}), b.view({-1}));
  });
}

// A view whose input must move first is a copy: writes into it raise while
// the viewed DTensor lives, rather than silently missing it.
TEST(ViewRulesTest, WritesIntoACopiedViewRaise) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = iota({5, 4});  // 5 rows over 4: flattening gathers
    at::Tensor x = dist(a, mesh, "S(0)").tensor();
    at::Tensor flat = x.view({-1});
    EXPECT_DT(flat, a.view({-1}));
    EXPECT_CONTAINS(error_of([&] { flat.fill_(5); }), "aten::fill_.Scalar: argument 0 is written");
    EXPECT_CONTAINS(error_of([&] { flat.view({4, 5}).zero_(); }), "a copy, not a view");
    EXPECT_CONTAINS(error_of([&] { flat.detach().mul_(2); }), "laid out as [S(0)]");
    EXPECT_CONTAINS(error_of([&] { x.select(0, 1).copy_(x.select(0, 2)); }),
                    "aten::select.int on a DTensor laid out as [S(0)]");
    EXPECT_CONTAINS(error_of([&] { at::add_out(flat, flat, flat); }),
                    "aten::add.out: argument 3 is written, but it is the result of aten::view");
    // A shard whose strides allow no view is copied by the local reshape:
    // the layout is kept, the memory is not.
    const at::Tensor b = iota({8, 4});
    at::Tensor rows = dist(b, mesh, "S(0)").tensor();
    at::Tensor flat_columns = rows.t().view({-1});
    EXPECT_DT(flat_columns, b.t().reshape({-1}), "SS(0,4)");
    EXPECT_CONTAINS(error_of([&] { flat_columns.zero_(); }), "whose shard allows no such view");
    EXPECT_DT(x, a);  // nothing was written
    // A copy made on purpose takes writes. (Autograd's view tracking keeps
    // the viewed DTensor alive as the copy's base, so they never would.)
    EXPECT_DT(flat.clone().fill_(5), at::full({20}, 5.0));
    // A view that keeps the layout writes through.
    at::Tensor y = dist(a, mesh, "S(1)").tensor();
    y.select(0, 1).fill_(9);
    at::Tensor expected = a.clone();
    expected.select(0, 1).fill_(9);
    EXPECT_DT(y, expected, "S(1)");
  });
}

// Size-1 dims joining or leaving an uneven split (a bias gradient's
// [1, 11] -> [11] in Linear's backward) keep it: the blocks are the same.
TEST(ViewRulesTest, ViewThroughSizeOneDimsKeepsAnUnevenSplit) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    ScopedStrictMode strict;
    at::Tensor row = iota({1, 11});
    EXPECT_DT(dist(row, mesh, "S(1)").tensor().view({11}), row.view({11}), "S(0)");
    at::Tensor flat = iota({11});
    EXPECT_DT(dist(flat, mesh, "S(0)").tensor().view({1, 11}), flat.view({1, 11}), "S(1)");
    EXPECT_DT(dist(flat, mesh, "S(0)").tensor().view({1, 11, 1}), flat.view({1, 11, 1}), "S(1)");
    at::Tensor column = iota({5, 1});
    EXPECT_DT(dist(column, mesh, "S(0)").tensor().view({5}), column.view({5}), "S(0)");
  });
}

TEST(ViewRulesTest, View2D) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor a = iota({8, 4});
    EXPECT_DT(dist(a, mesh, "S(0),S(0)").tensor().view({-1}), a.view({-1}), "S(0),S(0)");
    EXPECT_DT(dist(a, mesh, "S(0),R").tensor().view({-1}), a.view({-1}), "S(0),R");
    // Rows then columns: whatever the layout, the values.
    EXPECT_DT(dist(a, mesh, "S(0),S(1)").tensor().view({-1}), a.view({-1}));
    EXPECT_DT(dist(a, mesh, "S(1),S(0)").tensor().view({-1}), a.view({-1}));
    EXPECT_DT(dist(a, mesh, "R,S(1)").tensor().view({-1}), a.view({-1}));
    at::Tensor u = iota({5, 6});
    EXPECT_DT(dist(u, mesh, "S(0),S(1)").tensor().view({-1}), u.view({-1}));
    EXPECT_DT(dist(u, mesh, "S(1),S(0)").tensor().view({3, 10}), u.view({3, 10}));
    // A strided split of the rows cannot be kept, so mesh dim 0 gathers:
    // mesh dim 1's columns then stride by all 8 rows, not by the 4 a kept
    // split would have left.
    EXPECT_DT(dist(a, mesh, "SS(0,2),S(1)").tensor().view({-1}), a.view({-1}));
  });
}

// A later mesh dim's strided split counts the rows earlier mesh dims leave,
// so it may only be kept when they keep theirs.
TEST(ViewRulesTest, View3DKeepsALaterSplitOnlyWithTheEarlierOnes) {
  run_ranks(8, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2, 2});
    const at::Tensor a = iota({6, 4});  // 6 rows over 4 ranks: uneven, gathered
    EXPECT_DT(dist(a, mesh, "S(0),S(1),S(0)").tensor().view({-1}), a.view({-1}));
    const at::Tensor b = iota({8, 4});  // even: every split kept
    EXPECT_DT(dist(b, mesh, "S(0),S(1),S(0)").tensor().view({-1}), b.view({-1}),
              "S(0),SS(0,4),S(0)");
  });
}

// ===========================================================================
// Indexing

// Row-wise embedding masks ids outside each rank's rows; ids outside the
// whole vocabulary raise, as the op on whole inputs does, instead of
// looking up zeros.
TEST(IndexingRulesTest, RowwiseEmbeddingOfIdsOutsideTheVocabularyRaises) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor weight = iota({10, 3});
    const DTensor rowwise = dist(weight, mesh, "S(0)");
    const at::Tensor ids = at::tensor({0, 9, 4, 4}, at::kLong);
    EXPECT_DT(at::embedding(rowwise.tensor(), dist(ids, mesh, "R").tensor()),
              at::embedding(weight, ids), "P(sum)");
    for (int64_t bad : {10, -1}) {
      const at::Tensor with_bad = at::tensor({int64_t{0}, bad, int64_t{4}}, at::kLong);
      EXPECT_CONTAINS(
          error_of([&] { at::embedding(rowwise.tensor(), dist(with_bad, mesh, "R").tensor()); }),
          "aten::embedding: expected every id in [0, 10), found ids from ");
    }
  });
}

TEST(IndexingRulesTest, GatherAndScatterKeepASplitOfAnotherDim) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor a = iota({7, 6});
    // Row i of `by_row` indexes columns of row i; each row of `permuted` is a permutation.
    const at::Tensor by_row = at::remainder(iota({7, 3}, 0, at::kLong) * 5, 6);
    const at::Tensor permuted = at::remainder(iota({7, 6}, 0, at::kLong) * 5, 6);
    const at::Tensor src = iota({7, 6}, 100);
    // Rows split alike (7 over 4 ranks: uneven) stay split; strict mode
    // raises if anything had to move.
    std::optional<ScopedStrictMode> strict(std::in_place);
    EXPECT_DT(at::gather(dist(a, mesh, "S(0)"), 1, dist(by_row, mesh, "S(0)")),
              at::gather(a, 1, by_row), "S(0)");
    EXPECT_DT(at::scatter(dist(a, mesh, "S(0)"), 1, dist(permuted, mesh, "S(0)"),
                          dist(src, mesh, "S(0)")),
              at::scatter(a, 1, permuted, src), "S(0)");
    EXPECT_DT(at::scatter_add(dist(a, mesh, "S(0)"), 1, dist(permuted, mesh, "S(0)"),
                              dist(src, mesh, "S(0)")),
              at::scatter_add(a, 1, permuted, src), "S(0)");
    // A whole source gathered by an index split along the gathered dim: the
    // output follows the index.
    EXPECT_DT(at::gather(dist(a, mesh, "R"), 1, dist(by_row, mesh, "S(1)")),
              at::gather(a, 1, by_row), "S(1)");
    strict.reset();
    // Split along another dim, the whole source must be split alike first.
    EXPECT_DT(at::gather(dist(a, mesh, "R"), 1, dist(by_row, mesh, "S(0)")),
              at::gather(a, 1, by_row), "S(0)");
    // Split along the indexed dim: right values, never a split output there.
    const at::Tensor along = at::gather(dist(a, mesh, "S(1)"), 1, dist(by_row, mesh, "S(1)"));
    EXPECT_DT(along, at::gather(a, 1, by_row));
    // In place on a split tensor keeps its layout.
    DTensor written = dist(a, mesh, "S(0)");
    written.tensor().scatter_(1, dist(permuted, mesh, "S(0)"), dist(src, mesh, "S(0)"));
    EXPECT_DT(written.tensor(), at::scatter(a, 1, permuted, src), "S(0)");
  });
}

}  // namespace
}  // namespace dtensor
