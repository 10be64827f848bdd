// Copyright 2026 The dtensor Authors.
//
// Random ops on DTensors equal the single-device op after the same seed
// (dtensor/core/random.h), on every layout, exactly.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/core/random.h>
#include "tests/rules/rules_test_util.h"
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

using rules_testing::dist;
using rules_testing::iota;
using rules_testing::placements_of;

constexpr uint64_t kSeed = 2026;

// The single-device result of `op` after at::manual_seed(kSeed), computed on
// the test's own thread (the local backend's ranks are threads, which must
// not share the default generator).
template <typename Op>
at::Tensor one_device(Op op) {
  at::manual_seed(kSeed);
  return op();
}

struct Layout {
  std::vector<int64_t> mesh;
  const char* placements;
};

// Uneven and empty shards, 2-D meshes, StridedShard and Ragged.
const std::vector<Layout>& layouts() {
  static const std::vector<Layout> all = {
      {{4}, "S(0)"},
      {{4}, "S(1)"},
      {{4}, "R"},
      {{2, 2}, "S(0),S(1)"},
      {{2, 2}, "SS(0,2),S(0)"},
      {{4}, "RG(dims=1,units=[2,0,4,1])"},
  };
  return all;
}

template <typename Op>
void expect_matches_one_device(const at::Tensor& global, const at::Tensor& expected, Op op) {
  for (const Layout& layout : layouts()) {
    SCOPED_TRACE(layout.placements);
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", layout.mesh);
      dtensor::manual_seed(kSeed);
      const DTensor result(op(dist(global, mesh, layout.placements).tensor()));
      EXPECT_EQ(placements_to_string(result.placements()),
                placements_to_string(parse_placements(layout.placements)));
      EXPECT_TRUE(at::equal(result.full_tensor(), expected));
    });
  }
}

TEST(RandomOpsTest, DropoutMatchesOneDevice) {
  const at::Tensor x = iota({7, 5});
  const auto dropout = [](const at::Tensor& t) { return at::dropout(t, 0.3, /*train=*/true); };
  const at::Tensor expected = one_device([&] { return dropout(x); });
  ASSERT_FALSE(at::equal(expected, x));  // something was dropped
  expect_matches_one_device(x, expected, dropout);
}

TEST(RandomOpsTest, SuccessiveDrawsAdvanceLikeOneDevice) {
  const at::Tensor x = iota({7, 5});
  const auto twice = [](const at::Tensor& t) {
    const at::Tensor first = at::rand_like(t);
    return first + at::randn_like(t) * 10;
  };
  expect_matches_one_device(x, one_device([&] { return twice(x); }), twice);
}

TEST(RandomOpsTest, InPlaceSamplersMatchOneDevice) {
  const at::Tensor x = iota({7, 5});
  const auto samplers = [](const at::Tensor& t) {
    at::Tensor a = t.clone(), b = t.clone(), c = t.clone();
    a.uniform_(-2, 3);
    b.normal_(1, 4);
    c.bernoulli_(0.25);
    return a + b * 7 + c * 100;
  };
  expect_matches_one_device(x, one_device([&] { return samplers(x); }), samplers);
}

TEST(RandomOpsTest, BfloatAndExplicitDtype) {
  const at::Tensor x = iota({6, 3}).to(at::kBFloat16);
  const auto draw = [](const at::Tensor& t) {
    return at::rand_like(t).to(at::kFloat) + at::rand_like(t, at::kDouble).to(at::kFloat);
  };
  expect_matches_one_device(x, one_device([&] { return draw(x); }), draw);
}

TEST(RandomOpsTest, PartialInputGivesReplicate) {
  const at::Tensor x = iota({5, 3});
  const at::Tensor expected = one_device([&] { return at::rand_like(x); });
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const DTensor partial = redistribute_any(dist(x, mesh, "R"), parse_placements("P(sum)"));
    dtensor::manual_seed(kSeed);
    const at::Tensor drawn = at::rand_like(partial.tensor());
    EXPECT_EQ(placements_of(drawn), "R");
    EXPECT_TRUE(at::equal(DTensor(drawn).full_tensor(), expected));
  });
}

TEST(RandomOpsTest, UnseededRankRaises) {
  run_ranks(2, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    const DTensor d = dist(iota({4, 2}), mesh, "S(0)");
    DTENSOR_EXPECT_ERROR(at::rand_like(d.tensor()), "dtensor::manual_seed");
  });
}

}  // namespace
}  // namespace dtensor
