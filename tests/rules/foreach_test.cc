// Copyright 2026 The dtensor Authors.
//
// `_foreach_*` ops on lists of DTensors whose elements have different shapes
// and layouts (rules/families/foreach_ops.cc) equal the same ops on the
// global tensors, element by element, and keep each element's layout.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/base/compat.h>
#include <dtensor/dispatch/dispatch.h>
#include "tests/rules/rules_test_util.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using rules_testing::dist;
using rules_testing::iota;
using rules_testing::placements_of;
using rules_testing::Shape;
using rules_testing::signed_iota;

// Uneven shards (5 rows on 4 ranks), a split trailing dim, a replicated
// vector and empty shards (2 rows on 4 ranks).
const std::vector<Shape> kShapes = {{5, 3}, {4, 6}, {7}, {2, 3}};
const std::vector<const char*> kLayouts = {"S(0)", "S(1)", "R", "S(0)"};

std::vector<at::Tensor> globals(int64_t start) {
  std::vector<at::Tensor> out;
  for (const Shape& shape : kShapes) out.push_back(iota(shape, start));
  return out;
}

std::vector<at::Tensor> distributed(const std::vector<at::Tensor>& tensors,
                                    const DeviceMesh& mesh) {
  std::vector<at::Tensor> out;
  // Clones: a replicated DTensor shares the tensor it was made from, and the
  // rank threads of the local backend share `tensors`.
  for (size_t i = 0; i < tensors.size(); ++i) {
    out.push_back(dist(tensors[i].clone(), mesh, kLayouts[i]));
  }
  return out;
}

// Every element has its own layout and equals `expected` exactly.
void expect_elements(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(placements_of(got[i]), kLayouts[i]);
    EXPECT_TRUE(at::equal(DTensor(got[i]).full_tensor(), expected[i]))
        << rules_testing::describe(DTensor(got[i]).full_tensor()) << "\nexpected\n"
        << rules_testing::describe(expected[i]);
  }
}

TEST(ForeachOpsTest, InPlaceListScalarAndScalarListOps) {
  const std::vector<at::Tensor> params = globals(1), other = globals(-20), third = globals(3);
  std::vector<at::Tensor> expected;
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor e = params[i].clone();
    e.add_(other[i], 2).mul_(3).addcmul_(other[i], third[i], static_cast<double>(i + 1));
    expected.push_back(e.sub_(1));
  }
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    std::vector<at::Tensor> p = distributed(params, mesh);
    const std::vector<at::Tensor> o = distributed(other, mesh), t = distributed(third, mesh);
    at::_foreach_add_(p, o, 2);
    at::_foreach_mul_(p, 3);
    at::_foreach_addcmul_(p, o, t, std::vector<at::Scalar>{1.0, 2.0, 3.0, 4.0});
    at::_foreach_sub_(p, 1);
    expect_elements(p, expected);
  });
}

TEST(ForeachOpsTest, OutOfPlaceOpsReturnDTensorsInEachElementsLayout) {
  const std::vector<at::Tensor> a = globals(1), b = globals(-9);
  std::vector<at::Tensor> sums, squares, maxima;
  for (size_t i = 0; i < a.size(); ++i) {
    sums.push_back(a[i] + b[i]);
    squares.push_back(a[i].mul(a[i]).sqrt());
    maxima.push_back(at::maximum(a[i], b[i].neg()));
  }
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const std::vector<at::Tensor> da = distributed(a, mesh), db = distributed(b, mesh);
    expect_elements(at::_foreach_add(da, db), sums);
    expect_elements(at::_foreach_sqrt(at::_foreach_mul(da, da)), squares);
    expect_elements(at::_foreach_maximum(da, at::_foreach_neg(db)), maxima);
  });
}

TEST(ForeachOpsTest, NormOfEachElementReducesOverItsShards) {
  const std::vector<at::Tensor> a = globals(-7);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const std::vector<at::Tensor> elements = distributed(a, mesh);
    ScopedStrictMode strict;  // each shard's part is combined, nothing gathered
    const std::vector<at::Tensor> norms = at::_foreach_norm(elements, 2);
    ASSERT_EQ(norms.size(), a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const at::Tensor full = DTensor(norms[i]).full_tensor();
      EXPECT_EQ(full.dim(), 0);
      EXPECT_EQ(placements_of(norms[i]), "R");
      EXPECT_TRUE(at::allclose(full, a[i].norm(2))) << i << ": " << full << " vs " << a[i].norm(2);
    }
  });
}

// One Adam step written with foreach ops, as fused optimizers do, on a 2-D
// mesh: equal to the same math on the global tensors.
TEST(ForeachOpsTest, AdamStepWithForeachOpsMatchesOneDevice) {
  const double lr = 0.01, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  auto step = [&](std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                  std::vector<at::Tensor>& m, std::vector<at::Tensor>& v) {
    at::_foreach_mul_(m, beta1);
    at::_foreach_add_(m, grads, 1 - beta1);
    at::_foreach_mul_(v, beta2);
    at::_foreach_addcmul_(v, grads, grads, 1 - beta2);
    std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
    at::_foreach_add_(denom, eps);
    at::_foreach_addcdiv_(params, m, denom, -lr);
  };
  std::vector<at::Tensor> params = globals(1), grads = globals(-11), m, v;
  for (const at::Tensor& p : params) {
    m.push_back(at::zeros_like(p));
    v.push_back(at::zeros_like(p));
  }
  const std::vector<at::Tensor> initial = params;
  for (at::Tensor& p : params) p = p.clone();
  step(params, grads, m, v);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const std::vector<const char*> layouts = {"S(0),S(1)", "R,S(1)", "S(0),R", "R,R"};
    std::vector<at::Tensor> dp, dg, dm, dv;
    for (size_t i = 0; i < initial.size(); ++i) {
      dp.push_back(dist(initial[i].clone(), mesh, layouts[i]));
      dg.push_back(dist(grads[i], mesh, layouts[i]));
      dm.push_back(dist(at::zeros_like(initial[i]), mesh, layouts[i]));
      dv.push_back(dist(at::zeros_like(initial[i]), mesh, layouts[i]));
    }
    step(dp, dg, dm, dv);
    for (size_t i = 0; i < initial.size(); ++i) {
      SCOPED_TRACE(i);
      EXPECT_EQ(placements_of(dp[i]), layouts[i]);
      EXPECT_TRUE(at::allclose(DTensor(dp[i]).full_tensor(), params[i]));
      EXPECT_TRUE(at::allclose(DTensor(dv[i]).full_tensor(), v[i]));
    }
  });
}

TEST(ForeachOpsTest, ListsOfDifferentLengthsRaise) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    std::vector<at::Tensor> a = {dist(iota({4}), mesh, "S(0)"), dist(iota({2}), mesh, "R")};
    const std::vector<at::Tensor> b = {dist(iota({4}), mesh, "S(0)")};
#if DTENSOR_TORCH_AT_LEAST(2, 2)
    // libtorch's foreach autograd kernels check the lengths before dtensor
    // sees the call (pytorch#112756).
    try {
      at::_foreach_add_(a, b);
      ADD_FAILURE() << "expected an error for lists of lengths 2 and 1";
    } catch (const c10::Error& error) {
      EXPECT_NE(std::string(error.what()).find("Tensor lists must have the same number of tensors"),
                std::string::npos)
          << error.what();
    }
#else
    DTENSOR_EXPECT_ERROR(at::_foreach_add_(a, b), "expected list arguments of one length");
#endif
  });
}

TEST(ForeachOpsTest, AnElementOpWithoutRuleNamesThatOp) {
  run_ranks(2, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    const std::vector<at::Tensor> a = {dist(iota({4}), mesh, "S(0)")};
    DTENSOR_EXPECT_ERROR(at::_foreach_lgamma(a), "no sharding rule for aten::lgamma");
  });
}

}  // namespace
}  // namespace dtensor
