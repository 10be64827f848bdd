// Copyright 2026 The dtensor Authors.
//
// local_map (dtensor/spmd/local_map.h) on the local backend, 4 ranks: a
// column-parallel matmul written per rank equals one device exactly, values
// and gradients (integer-valued float64, so every sum is exact); inputs laid
// out otherwise are redistributed, or refused when asked; bad placements get
// a clear error; typed collectives compose with it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/spmd/collectives.h>
#include <dtensor/spmd/local_map.h>
#include "tests/support/expect_error.h"

namespace dtensor {
namespace {

constexpr int kRanks = 4;

// Small integers, distinct per element, as float64.
at::Tensor integers(const std::vector<int64_t>& shape, int64_t phase) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return at::arange(n, at::kDouble).mul(7).add(phase).remainder(11).sub(5).reshape(shape);
}

std::vector<at::Tensor> matmul(const std::vector<at::Tensor>& in) { return {at::mm(in[0], in[1])}; }

// x [3, 4] replicated times w [4, 8] split by columns: y split by columns.
LocalMapFunction column_parallel_mm(const DeviceMesh& mesh, LocalMapOptions options = {}) {
  return local_map(matmul, {parse_placements("S(1)")},
                   {parse_placements("R"), parse_placements("S(1)")}, mesh, options);
}

std::string placements_of(const at::Tensor& t) {
  return placements_to_string(DTensor(t).placements());
}

struct Reference {
  at::Tensor y, x_grad, w_grad;
};

// One device: y = x w, loss = sum(y * t).
Reference one_device(const at::Tensor& x, const at::Tensor& w, const at::Tensor& t) {
  const at::Tensor xr = x.clone().requires_grad_();
  const at::Tensor wr = w.clone().requires_grad_();
  const at::Tensor y = at::mm(xr, wr);
  (y * t).sum().backward();
  return {y.detach(), xr.grad(), wr.grad()};
}

// x [3, 4], w [4, 8] and the loss weights t [3, 8].
at::Tensor x_value() { return integers({3, 4}, 1); }
at::Tensor w_value() { return integers({4, 8}, 2); }
at::Tensor t_value() { return integers({3, 8}, 3); }

// The column-parallel matmul on a w laid out as `w_layout`, against one device.
void expect_column_parallel_matches(const std::string& w_layout) {
  const Reference reference = one_device(x_value(), w_value(), t_value());
  run_ranks(kRanks, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor x =
        distribute_tensor(x_value().clone().requires_grad_(), mesh, parse_placements("R"));
    const DTensor w =
        distribute_tensor(w_value().clone().requires_grad_(), mesh, parse_placements(w_layout));
    const DTensor t = distribute_tensor(t_value(), mesh, parse_placements("S(1)"));
    const DTensor y(column_parallel_mm(mesh)({x.tensor(), w.tensor()})[0]);
    EXPECT_EQ(placements_to_string(y.placements()), "S(1)");
    EXPECT_TRUE(at::equal(y.full_tensor(), reference.y));
    (y.tensor() * t.tensor()).sum().backward();
    // x is Replicate, used by each rank's work: its gradient is a pending sum.
    EXPECT_EQ(placements_of(x.tensor().grad()), "P(sum)");
    EXPECT_TRUE(at::equal(DTensor(x.tensor().grad()).full_tensor(), reference.x_grad));
    // w's gradient goes back to w's own layout.
    EXPECT_EQ(placements_of(w.tensor().grad()), w_layout);
    EXPECT_TRUE(at::equal(DTensor(w.tensor().grad()).full_tensor(), reference.w_grad));
  });
}

TEST(LocalMapTest, ColumnParallelMatmulEqualsOneDevice) { expect_column_parallel_matches("S(1)"); }

TEST(LocalMapTest, RedistributesMismatchedInputs) { expect_column_parallel_matches("S(0)"); }

// Given its global shape, an output needs no gather to learn it; a local
// output that does not fit the shape given is an error.
TEST(LocalMapTest, OutShapesSaveTheShapeGatherAndAreChecked) {
  run_ranks(kRanks, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor x = distribute_tensor(x_value(), mesh, parse_placements("R"));
    const DTensor w = distribute_tensor(w_value(), mesh, parse_placements("S(1)"));
    LocalMapOptions learned, given;
    given.out_shapes = {std::vector<int64_t>{3, 8}};
    for (const LocalMapOptions& options : {learned, given}) {
      CollectiveCounter counter;
      const DTensor y(column_parallel_mm(mesh, options)({x.tensor(), w.tensor()})[0]);
      EXPECT_EQ(counter.total(), options.out_shapes.empty() ? 1 : 0);
      EXPECT_EQ(y.sizes(), (std::vector<int64_t>{3, 8}));
      EXPECT_TRUE(at::equal(y.full_tensor(), at::mm(x_value(), w_value())));
    }
    LocalMapOptions wrong;
    wrong.out_shapes = {std::vector<int64_t>{3, 12}};
    DTENSOR_EXPECT_ERROR(column_parallel_mm(mesh, wrong)({x.tensor(), w.tensor()}),
                         "local_map: output 0: out_shapes[0] is [3, 12], so this rank's local "
                         "output laid out as S(1) must be [3, 3], found [3, 2]");
    LocalMapOptions too_many;
    too_many.out_shapes = {std::nullopt, std::nullopt};
    DTENSOR_EXPECT_ERROR(column_parallel_mm(mesh, too_many)({x.tensor(), w.tensor()}),
                         "local_map: out_shapes: expected one per output of fn (1), found 2");
  });
}

TEST(LocalMapTest, StrictModeRefusesMismatchedInputs) {
  run_ranks(kRanks, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor x = distribute_tensor(x_value(), mesh, parse_placements("R"));
    const DTensor w = distribute_tensor(w_value(), mesh, parse_placements("S(0)"));
    LocalMapOptions strict;
    strict.redistribute_inputs = false;
    DTENSOR_EXPECT_ERROR(column_parallel_mm(mesh, strict)({x.tensor(), w.tensor()}),
                         "local_map: input 1: expected placements S(1) (in_placements[1]), "
                         "found S(0); redistribute it first or set "
                         "LocalMapOptions::redistribute_inputs");
  });
}

TEST(LocalMapTest, WrongNumberOfPlacementsIsAnError) {
  run_ranks(kRanks, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor x = distribute_tensor(x_value(), mesh, parse_placements("R"));
    const DTensor w = distribute_tensor(w_value(), mesh, parse_placements("S(1)"));
    DTENSOR_EXPECT_ERROR(local_map(matmul, {parse_placements("S(1)")}, {parse_placements("R")},
                                   mesh)({x.tensor(), w.tensor()}),
                         "local_map: in_placements: expected one per input (2), found 1");
    DTENSOR_EXPECT_ERROR(local_map(matmul, {parse_placements("S(1)"), parse_placements("R")},
                                   {parse_placements("R"), parse_placements("S(1)")},
                                   mesh)({x.tensor(), w.tensor()}),
                         "local_map: out_placements: expected one per output of fn (1), found 2");
    DTENSOR_EXPECT_ERROR(local_map(matmul, {parse_placements("S(1)")},
                                   {parse_placements("R,R"), parse_placements("S(1)")},
                                   mesh)({x.tensor(), w.tensor()}),
                         "local_map: in_placements[0]: expected one per mesh dim (1), found 2");
    DTENSOR_EXPECT_ERROR(local_map(matmul, {parse_placements("S(1),R")},
                                   {parse_placements("R"), parse_placements("S(1)")},
                                   mesh)({x.tensor(), w.tensor()}),
                         "local_map: out_placements[0]: expected one per mesh dim (1), found 2");
  });
}

TEST(LocalMapTest, PlainTensorsPassThroughWithNullopt) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor w = distribute_tensor(w_value(), mesh, parse_placements("S(1)"));
    const DTensor y(local_map(matmul, {parse_placements("S(1)")},
                              {std::nullopt, parse_placements("S(1)")},
                              mesh)({x_value(), w.tensor()})[0]);
    EXPECT_TRUE(at::equal(y.to_local(), at::mm(x_value(), w_value().narrow(1, 2 * rank, 2))));
    // An output with nullopt comes back as fn returned it.
    const std::vector<at::Tensor> plain =
        local_map(matmul, {std::nullopt}, {std::nullopt, parse_placements("S(1)")},
                  mesh)({x_value(), w.tensor()});
    EXPECT_FALSE(is_dtensor(plain[0]));
    DTENSOR_EXPECT_ERROR(
        local_map(matmul, {parse_placements("S(1)")},
                  {parse_placements("R"), parse_placements("S(1)")}, mesh)({x_value(), w.tensor()}),
        "local_map: input 0 is a plain tensor: expected nullopt in_placements[0], "
        "found R");
    DTENSOR_EXPECT_ERROR(local_map(matmul, {parse_placements("S(1)")}, {std::nullopt, std::nullopt},
                                   mesh)({x_value(), w.tensor()}),
                         "local_map: input 1 is a DTensor laid out as S(1): expected placements "
                         "in in_placements[1], found nullopt");
  });
}

// A Replicate output's gradient reaches fn as a pending sum: one rank holds
// it, so per-rank work on a Replicate input (here doubling) sums to the
// exact gradient, whatever the ranks do with it.
TEST(LocalMapTest, ReplicatedOutputGradientIsExact) {
  run_ranks(kRanks, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor x =
        distribute_tensor(x_value().clone().requires_grad_(), mesh, parse_placements("R"));
    std::vector<at::Tensor> seen;
    const auto doubled = local_map(
        [&](const std::vector<at::Tensor>& in) {
          at::Tensor out = in[0] * 2;
          out.register_hook([&](const at::Tensor& grad) { seen.push_back(grad); });
          return std::vector<at::Tensor>{out};
        },
        {parse_placements("R")}, {parse_placements("R")}, mesh);
    const DTensor y(doubled({x.tensor()})[0]);
    EXPECT_TRUE(at::equal(y.to_local(), x_value() * 2));
    y.tensor().sum().backward();
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_TRUE(at::equal(
        seen[0], rank == 0 ? at::ones({3, 4}, at::kDouble) : at::zeros({3, 4}, at::kDouble)));
    EXPECT_EQ(placements_of(x.tensor().grad()), "P(sum)");
    EXPECT_TRUE(
        at::equal(DTensor(x.tensor().grad()).full_tensor(), at::full({3, 4}, 2.0, at::kDouble)));
  });
}

// Row-parallel matmul inside local_map with a typed collective: x split by
// columns, w by rows, their local product all-reduced to a Replicate output.
// The output's gradient (a pending sum) goes back through all_reduce's
// backward (an all-reduce) to every rank's shard of x and w. (With
// ReplicatedType::kInvariant, ranks other than 0 would get zero gradients:
// a Replicate output must be R-typed.)
TEST(LocalMapTest, ComposesWithTypedCollectives) {
  const at::Tensor x = integers({3, 8}, 1);
  const at::Tensor w = integers({8, 4}, 2);
  const at::Tensor t = integers({3, 4}, 3);
  const Reference reference = one_device(x, w, t);
  run_ranks(kRanks, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {kRanks}, {"tp"});
    const DTensor x_dt =
        distribute_tensor(x.clone().requires_grad_(), mesh, parse_placements("S(1)"));
    const DTensor w_dt =
        distribute_tensor(w.clone().requires_grad_(), mesh, parse_placements("S(0)"));
    const auto row_parallel_mm = local_map(
        [&mesh](const std::vector<at::Tensor>& in) {
          return std::vector<at::Tensor>{
              spmd::all_reduce(at::mm(in[0], in[1]), mesh, "tp", spmd::ReplicatedType::kReplicate)};
        },
        {parse_placements("R")}, {parse_placements("S(1)"), parse_placements("S(0)")}, mesh);
    const DTensor y(row_parallel_mm({x_dt.tensor(), w_dt.tensor()})[0]);
    EXPECT_TRUE(at::equal(y.to_local(), reference.y));
    (y.tensor() * distribute_tensor(t, mesh, parse_placements("R")).tensor()).sum().backward();
    EXPECT_TRUE(at::equal(DTensor(x_dt.tensor().grad()).full_tensor(), reference.x_grad));
    EXPECT_TRUE(at::equal(DTensor(w_dt.tensor().grad()).full_tensor(), reference.w_grad));
  });
}

}  // namespace
}  // namespace dtensor
