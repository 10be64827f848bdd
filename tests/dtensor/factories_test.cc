// Copyright 2026 The dtensor Authors.
#include <dtensor/factories.h>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

const std::vector<std::string> kLayouts = {
    "R,R",         "S(0),S(1)", "S(1),S(0)", "SS(0,2),S(0)", "RG(dims=1,units=[2,1]),R",
    "S(0),P(sum)", "P(max),R"};

TEST(FactoriesTest, ConstantsAreTheSameGlobalTensorInEveryLayout) {
  run_ranks(4, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const std::string& layout : kLayouts) {
      SCOPED_TRACE(layout);
      const auto placements = parse_placements(layout);
      DTensor z = zeros({7, 5}, mesh, placements);
      DTensor o = ones({7, 5}, mesh, placements, at::kLong);
      DTensor f = full({7, 5}, 2.5, mesh, placements, at::kBFloat16);
      EXPECT_TRUE(at::equal(z.full_tensor(), at::zeros({7, 5})));
      EXPECT_TRUE(at::equal(o.full_tensor(), at::ones({7, 5}, at::kLong)));
      EXPECT_TRUE(at::equal(f.full_tensor(), at::full({7, 5}, 2.5, at::kBFloat16)));
      EXPECT_EQ(o.to_local().sizes(), c10::IntArrayRef(o.spec().local_layout().local_shape));
      DTensor e = empty({7, 5}, mesh, placements, at::kDouble);
      EXPECT_EQ(e.dtype(), at::kDouble);
      EXPECT_EQ(e.to_local().sizes(), c10::IntArrayRef(e.spec().local_layout().local_shape));
    }
  });
}

TEST(FactoriesTest, PartialSumHoldsTheValueOnCoordinateZeroOnly) {
  run_ranks(2, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2});
    DTensor o = ones({3}, mesh, parse_placements("P(sum)"));
    EXPECT_TRUE(at::equal(o.to_local(), rank == 0 ? at::ones({3}) : at::zeros({3})));
    DTensor m = full({3}, 4, mesh, parse_placements("P(max)"));
    EXPECT_TRUE(at::equal(m.to_local(), at::full({3}, 4.0)));
  });
}

TEST(FactoriesTest, RandomValuesMatchSingleDeviceForEveryLayout) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1234);
  const at::Tensor uniform = at::rand({9, 6}, generator);
  generator = at::make_generator<at::CPUGeneratorImpl>(1234);
  const at::Tensor normal = at::randn({9, 6}, generator);
  run_ranks(4, [&](int) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const char* layout : {"R,R", "S(0),S(1)", "SS(0,2),S(0)", "S(1),RG(dims=1,units=[0,1])"}) {
      SCOPED_TRACE(layout);
      DTensor u = rand({9, 6}, mesh, parse_placements(layout), 1234);
      DTensor n = randn({9, 6}, mesh, parse_placements(layout), 1234);
      EXPECT_TRUE(at::equal(u.full_tensor(), uniform));
      EXPECT_TRUE(at::equal(n.full_tensor(), normal));
      EXPECT_TRUE(
          at::equal(u.to_local(), distribute_tensor(uniform, mesh, u.placements()).to_local()));
    }
    EXPECT_FALSE(at::equal(rand({9, 6}, mesh, parse_placements("R,R"), 99).full_tensor(), uniform));
  });
}

TEST(FactoriesTest, BadArguments) {
  run_ranks(2, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2});
    DTENSOR_EXPECT_ERROR(rand({4}, mesh, parse_placements("S(0)"), 1, at::kLong),
                         "rand: expected a floating dtype");
    DTENSOR_EXPECT_ERROR(zeros({4}, mesh, parse_placements("S(1)")), "S(1): expected a tensor dim");
    DTENSOR_EXPECT_ERROR(zeros({-1}, mesh, parse_placements("R")), "expected non-negative sizes");
    // A shape whose bytes overflow int64 is refused before any arithmetic on it.
    DTENSOR_EXPECT_ERROR(
        zeros({int64_t{1} << 31, int64_t{1} << 31, 2}, mesh, parse_placements("S(0)")),
        "expected sizes whose strides and product in bytes fit in 64 bits, found "
        "[2147483648, 2147483648, 2] of Float");
    DTENSOR_EXPECT_ERROR(empty({2, 0, int64_t{1} << 62, 4}, mesh, parse_placements("R")),
                         "found [2, 0, 4611686018427387904, 4] of Float");
    // Empty is fine however large the other sizes, as long as strides fit.
    EXPECT_EQ(empty({int64_t{1} << 40, 0, int64_t{1} << 20}, mesh, parse_placements("S(0)"))
                  .to_local()
                  .sizes(),
              c10::IntArrayRef({int64_t{1} << 39, 0, int64_t{1} << 20}));
    DTENSOR_EXPECT_ERROR(ones({4}, mesh, parse_placements("P(band)")),
                         "expects an integer or bool");
  });
}

}  // namespace
}  // namespace dtensor
