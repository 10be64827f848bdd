// Copyright 2026 The dtensor Authors.
#include <dtensor/dtensor.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dtensor/factories.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/placements/spec.h>
#include <dtensor/redistribute/collective_counter.h>
#include <dtensor/rules/propagation_cache.h>
#include "tests/support/expect_error.h"
#include "tests/support/layout_reference.h"

namespace dtensor {
namespace {

using Shape = std::vector<int64_t>;

// Distinct small integers 1..numel in `shape`, cast to `dtype` (exact).
at::Tensor make_global(const Shape& shape, at::ScalarType dtype = at::kFloat) {
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  return (at::arange(numel, at::kLong) + 1).reshape(shape).to(dtype);
}

std::string describe(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes() << " " << t.scalar_type() << "\n" << t;
  return out.str();
}

// Distributes `global` as `text` on `mesh` (optionally from `src_rank`, other
// ranks passing `garbage`) and checks local shard, spec and full tensor.
void check_distribute(const at::Tensor& global, const DeviceMesh& mesh, const std::string& text,
                      std::optional<int64_t> src_rank = std::nullopt,
                      const at::Tensor& garbage = at::Tensor()) {
  SCOPED_TRACE(::testing::Message() << text << " shape " << global.sizes() << " "
                                    << global.scalar_type() << " rank " << mesh.world()->rank()
                                    << (src_rank ? " src_rank " + std::to_string(*src_rank) : ""));
  std::vector<PlacementPtr> placements = parse_placements(text);
  const bool is_src = !src_rank || *src_rank == mesh.world()->rank();
  DTensor dt = distribute_tensor(is_src || !garbage.defined() ? global : garbage, mesh, placements,
                                 src_rank);
  at::Tensor expected = testing::expected_local(global.contiguous(), mesh, placements);
  EXPECT_TRUE(dt.to_local().is_contiguous());
  EXPECT_EQ(dt.to_local().scalar_type(), global.scalar_type());
  EXPECT_TRUE(at::equal(dt.to_local(), expected))
      << "local " << describe(dt.to_local()) << "\nexpected " << describe(expected);
  EXPECT_EQ(dt.sizes(), global.sizes().vec());
  EXPECT_EQ(dt.dtype(), global.scalar_type());
  EXPECT_TRUE(same_placements(dt.placements(),
                              normalize_placements(placements, global.dim(), mesh.shape())))
      << placements_to_string(dt.placements());
  EXPECT_EQ(dt.spec().local_layout().local_shape, dt.to_local().sizes().vec());
  at::Tensor full = dt.full_tensor();
  EXPECT_TRUE(at::equal(full, global)) << "full " << describe(full);
}

TEST(DTensorTest, DistributeOneDimMeshUneven) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({5, 3});
    for (const char* text : {"R", "S(0)", "S(1)", "S(-1)", "S(-2)", "P(sum)", "P(max)", "P(min)",
                             "P(avg)", "SS(0,2)", "SS(1,2)", "RG(dims=1,units=[1,2,1,0])",
                             "RG(dims=1,units=[0,0,1,0])", "RG(dims=2,units=[3,1,0,1])"}) {
      check_distribute(global, mesh, text);
    }
    // 1 row over 4 ranks: three empty shards.
    check_distribute(make_global({1, 4}), mesh, "S(0)");
    check_distribute(make_global({0, 4}), mesh, "S(0)");
    check_distribute(make_global({0, 4}), mesh, "S(1)");
  });
}

TEST(DTensorTest, DistributeShardSizesFollowTorchChunk) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({5, 3});
    DTensor dt = distribute_tensor(global, mesh, parse_placements("S(0)"));
    const Shape rows = {2, 2, 1, 0};
    const Shape offsets = {0, 2, 4, 5};
    EXPECT_EQ(dt.to_local().sizes().vec(), (Shape{rows[rank], 3}));
    if (rows[rank] > 0) {
      EXPECT_TRUE(at::equal(dt.to_local(), global.narrow(0, offsets[rank], rows[rank])));
    }
    // StridedShard: L=9, sf=2, n=4 gives [0,1,5],[2,3,6],[4,7],[8].
    at::Tensor nine = make_global({9});
    const std::vector<std::vector<int64_t>> strided = {{0, 1, 5}, {2, 3, 6}, {4, 7}, {8}};
    DTensor ss = distribute_tensor(nine, mesh, parse_placements("SS(0,2)"));
    EXPECT_TRUE(
        at::equal(ss.to_local(), nine.index_select(0, at::tensor(strided[rank], at::kLong))))
        << describe(ss.to_local());
    EXPECT_TRUE(at::equal(ss.full_tensor(), nine));
  });
}

TEST(DTensorTest, DistributePartialSumKeepsValueOnCoordinateZero) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({3, 2});
    DTensor sum = distribute_tensor(global, mesh, parse_placements("P(sum)"));
    EXPECT_TRUE(at::equal(sum.to_local(), rank == 0 ? global : at::zeros_like(global)))
        << describe(sum.to_local());
    EXPECT_TRUE(at::equal(sum.full_tensor(), global));
    DTensor max = distribute_tensor(global, mesh, parse_placements("P(max)"));
    EXPECT_TRUE(at::equal(max.to_local(), global));
    EXPECT_TRUE(at::equal(max.full_tensor(), global));
  });
}

TEST(DTensorTest, DistributeTwoDimMesh) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor global = make_global({7, 5});
    for (const char* text : {"S(0),S(1)", "S(1),S(0)", "S(0),S(0)", "R,S(1)", "P(sum),S(0)",
                             "S(1),P(sum)", "P(sum),P(sum)", "P(max),R", "SS(0,2),S(0)",
                             "RG(dims=1,units=[1,3]),S(1)", "R,RG(dims=2,units=[2,1])"}) {
      check_distribute(global, mesh, text);
    }
    // Design table: (2,2), [7,5], S(0),S(1).
    DTensor dt = distribute_tensor(global, mesh, parse_placements("S(0),S(1)"));
    const std::vector<Shape> shapes = {{4, 3}, {4, 2}, {3, 3}, {3, 2}};
    EXPECT_EQ(dt.to_local().sizes().vec(), shapes[rank]);
  });
}

TEST(DTensorTest, DistributeDesignTableStridedCases) {
  run_ranks(8, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4, 2});
    check_distribute(make_global({18, 2}), mesh, "SS(0,2),S(0)");
    check_distribute(make_global({15, 5}), mesh, "SS(0,2),S(0)");
    check_distribute(make_global({13, 2}), mesh, "S(0),S(0)");
    DTensor dt = distribute_tensor(make_global({15, 5}), mesh, parse_placements("SS(0,2),S(0)"));
    const Shape offsets = {0, 8, 2, 10, 4, 12, 6, 14};
    const int64_t rows = rank == 7 ? 1 : 2;
    EXPECT_TRUE(at::equal(dt.to_local(), make_global({15, 5}).narrow(0, offsets[rank], rows)))
        << describe(dt.to_local());
  });
}

TEST(DTensorTest, DistributeRaggedMergedDims) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({3, 4, 2});
    check_distribute(global, mesh, "RG(dims=2,units=[1,2,1,0])");
    check_distribute(global, mesh, "RG(dims=3,units=[1,1,1,1])");
    check_distribute(global, mesh, "RG(dims=1,units=[0,1,0,0])");
    // 12 rows split 1:2:1:0 -> 3, 6, 3, 0 rows of 2.
    DTensor dt = distribute_tensor(global, mesh, parse_placements("RG(dims=2,units=[1,2,1,0])"));
    const Shape rows = {3, 6, 3, 0};
    const Shape begin = {0, 3, 9, 12};
    EXPECT_EQ(dt.to_local().sizes().vec(), (Shape{rows[rank], 2}));
    EXPECT_TRUE(
        at::equal(dt.to_local(), global.reshape({12, 2}).narrow(0, begin[rank], rows[rank])))
        << describe(dt.to_local());
  });
}

TEST(DTensorTest, DistributeFromSourceRank) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({5, 3});
    at::Tensor garbage = at::full({5, 3}, -99.0f);
    for (int64_t src : {0, 2, 3}) {
      for (const char* text :
           {"R", "S(0)", "S(1)", "P(sum)", "P(max)", "SS(0,2)", "RG(dims=1,units=[1,2,1,0])"}) {
        check_distribute(global, mesh, text, src, garbage);
      }
    }
  });
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor global = make_global({7, 5});
    at::Tensor garbage = at::full({7, 5}, -7.0f);
    for (const char* text : {"S(0),S(1)", "R,S(0)", "P(sum),S(1)", "SS(0,2),S(0)"}) {
      check_distribute(global, mesh, text, 3, garbage);
    }
  });
}

TEST(DTensorTest, DistributeZeroDim) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor scalar = at::scalar_tensor(7.0, at::kFloat);
    for (const char* text : {"R", "P(sum)", "P(max)"}) check_distribute(scalar, mesh, text);
    DTensor dt = distribute_tensor(scalar, mesh, parse_placements("P(sum)"));
    EXPECT_EQ(dt.to_local().dim(), 0);
    EXPECT_EQ(dt.to_local().item<float>(), rank == 0 ? 7.0f : 0.0f);
    EXPECT_EQ(dt.full_tensor().dim(), 0);
    DTENSOR_EXPECT_ERROR(distribute_tensor(scalar, mesh, parse_placements("S(0)")), "S(0)");
  });
}

TEST(DTensorTest, DistributeDtypes) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    for (at::ScalarType dtype : {at::kBFloat16, at::kLong, at::kDouble, at::kInt}) {
      at::Tensor global = make_global({5, 6}, dtype);
      for (const char* text :
           {"R", "S(0)", "S(1)", "P(sum)", "P(max)", "SS(1,2)", "RG(dims=1,units=[2,0,1,1])"}) {
        check_distribute(global, mesh, text);
      }
      DTensor dt = distribute_tensor(global, mesh, parse_placements("S(1)"));
      EXPECT_EQ(dt.to_local().scalar_type(), dtype);
      at::Tensor back = dt.redistribute(parse_placements("R")).to_local();
      EXPECT_EQ(back.scalar_type(), dtype);
      EXPECT_TRUE(at::equal(back, global));
    }
  });
}

TEST(DTensorTest, DistributeNonContiguousInput) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor transposed = make_global({5, 6}).t();  // [6, 5], not contiguous
    ASSERT_FALSE(transposed.is_contiguous());
    for (const char* text : {"R", "S(0)", "S(1)", "P(sum)", "SS(0,3)", "RG(dims=1,units=[1,0,2,1])",
                             "RG(dims=2,units=[1,1,1,1])"}) {
      check_distribute(transposed, mesh, text);
    }
    at::Tensor sliced = make_global({7, 10}).narrow(1, 2, 5);  // [7, 5], strided rows
    ASSERT_FALSE(sliced.is_contiguous());
    check_distribute(sliced, mesh, "S(1)");
    check_distribute(sliced, mesh, "S(0)", 1, at::zeros({7, 5}));
  });
}

// ---------------------------------------------------------------------------
// from_local

TEST(DTensorTest, FromLocalInfersEvenShardShape) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({8, 3});
    DTensor dt =
        from_local(global.narrow(0, 2 * rank, 2).contiguous(), mesh, parse_placements("S(0)"));
    EXPECT_EQ(dt.sizes(), (Shape{8, 3}));
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
    at::Tensor cols = make_global({3, 8});
    DTensor dt1 =
        from_local(cols.narrow(1, 2 * rank, 2).contiguous(), mesh, parse_placements("S(1)"));
    EXPECT_EQ(dt1.sizes(), (Shape{3, 8}));
    EXPECT_TRUE(at::equal(dt1.full_tensor(), cols));
    DTensor rep = from_local(global, mesh, parse_placements("R"));
    EXPECT_EQ(rep.sizes(), (Shape{8, 3}));
    DTensor partial = from_local(global * (rank + 1), mesh, parse_placements("P(sum)"));
    EXPECT_EQ(partial.sizes(), (Shape{8, 3}));
    EXPECT_TRUE(at::equal(partial.full_tensor(), global * 10));
  });
}

TEST(DTensorTest, FromLocalInfersUnevenShardShape) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({5, 3});
    const Shape rows = {2, 2, 1, 0};
    const Shape begin = {0, 2, 4, 5};
    DTensor dt = from_local(global.narrow(0, begin[rank], rows[rank]).contiguous(), mesh,
                            parse_placements("S(0)"));
    EXPECT_EQ(dt.sizes(), (Shape{5, 3}));
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
    at::Tensor wide = make_global({2, 6});  // 6 over 4: 2,2,2,0
    const Shape cols = {2, 2, 2, 0};
    const Shape col_begin = {0, 2, 4, 6};
    DTensor dt1 = from_local(wide.narrow(1, col_begin[rank], cols[rank]).contiguous(), mesh,
                             parse_placements("S(1)"));
    EXPECT_EQ(dt1.sizes(), (Shape{2, 6}));
    EXPECT_TRUE(at::equal(dt1.full_tensor(), wide));
  });
}

TEST(DTensorTest, FromLocalInfersTwoDimMeshShape) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor global = make_global({7, 5});
    auto placements = parse_placements("S(0),S(1)");
    DTensor dt = from_local(testing::expected_local(global, mesh, placements), mesh, placements);
    EXPECT_EQ(dt.sizes(), (Shape{7, 5}));
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
  });
}

// As PyTorch's from_local: the shard is the given tensor itself, strides and
// memory (PyTorch's test_dtensor_stride): a permuted local gives a DTensor
// with the global strides in that order, and no copy is made.
TEST(DTensorTest, FromLocalKeepsTheLocalTensorsStrides) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor global = make_global({4, 32, 8});
    // [4, 8, 8] laid out in memory as [8, 4, 8]: strides (8, 1, 32).
    const at::Tensor local =
        global.narrow(1, 8 * rank, 8).permute({2, 0, 1}).contiguous().permute({1, 2, 0});
    ASSERT_EQ(local.strides(), (Shape{8, 1, 32}));
    const DTensor dt = from_local(local, mesh, parse_placements("S(1)"));
    EXPECT_EQ(dt.to_local().strides(), (Shape{8, 1, 32}));
    EXPECT_EQ(dt.to_local().data_ptr(), local.data_ptr());
    EXPECT_EQ(dt.tensor().strides(), (Shape{8 * 4, 1, 32 * 4}));
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
    // A transposed shard: [2, 16] rows, given as the [16, 2] view of S(1).
    const at::Tensor rows = make_global({8, 16}).narrow(0, 2 * rank, 2).contiguous();
    const DTensor t = from_local(rows.t(), mesh, parse_placements("S(1)"));
    EXPECT_EQ(t.to_local().strides(), (Shape{1, 16}));
    EXPECT_EQ(t.to_local().data_ptr(), rows.data_ptr());
    EXPECT_TRUE(at::equal(t.full_tensor(), make_global({8, 16}).t()));
    // options.stride names the DTensor's strides.
    FromLocalOptions options;
    options.shape = Shape{16, 8};
    options.stride = Shape{1, 16};
    EXPECT_EQ(from_local(rows.t(), mesh, parse_placements("S(1)"), options).tensor().strides(),
              (Shape{1, 16}));
  });
}

// Dims of equal local strides keep their dim order (global_strides_like),
// so every rank reports the same strides: here a shard whose two dims step
// alike through memory, and an expanded one whose dims both have stride 0.
TEST(DTensorTest, EqualLocalStridesKeepDimOrder) {
  run_ranks(2, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2});
    const at::Tensor memory = make_global({8});
    const at::Tensor overlapping = memory.as_strided({3, 4}, {1, 1});
    EXPECT_EQ(from_local(overlapping, mesh, parse_placements("S(0)")).tensor().strides(),
              (Shape{4, 1}));
    EXPECT_EQ(from_local(overlapping, mesh, parse_placements("S(1)")).tensor().strides(),
              (Shape{8, 1}));
    const at::Tensor expanded = memory.narrow(0, 0, 1).expand({3, 4});
    EXPECT_EQ(from_local(expanded, mesh, parse_placements("S(0)")).tensor().strides(),
              (Shape{0, 0}));
  });
}

// The layers of a model hold DTensors of equal layouts whose specs are not
// shared: an op on them runs on the shards themselves (no collective, no
// copy: a view of one is a view of its shard), Partial inputs included.
TEST(DTensorTest, EqualUnsharedSpecsRunOnTheShards) {
  run_ranks(2, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2});
    const at::Tensor x = make_global({4, 3}), y = make_global({4, 3}) * 10, w = make_global({3, 2});
    const DTensor a = distribute_tensor(x, mesh, parse_placements("S(0)"));
    // A copy of a spec equals it without being it.
    const auto unshared = [](const at::Tensor& local, const DTensor& like) {
      return DTensor(local, std::make_shared<const DTensorSpec>(like.spec()));
    };
    const DTensor b = unshared(distribute_tensor(y, mesh, parse_placements("S(0)")).to_local(), a);
    const DTensor weight = distribute_tensor(w, mesh, parse_placements("R"));
    const DTensor p = from_local(at::full({4, 3}, rank + 1.0), mesh, parse_placements("P"));
    const DTensor q = unshared(at::full({4, 3}, 10.0), p);
    ASSERT_NE(a.spec_ptr(), b.spec_ptr());
    ASSERT_EQ(a.spec(), b.spec());
    ASSERT_NE(p.spec_ptr(), q.spec_ptr());
    ASSERT_EQ(p.spec(), q.spec());
    std::optional<DTensor> sum, product, flat, partial_sum;
    {
      CollectiveCounter counter;
      // Equal specs make equal keys: the layouts chosen for a + a and p + p
      // serve a + b and p + q.
      at::Tensor warm = a.tensor() + a.tensor();
      warm = p.tensor() + p.tensor();
      const int64_t cached = propagation_cache_size();
      sum = DTensor(a.tensor() + b.tensor());
      partial_sum = DTensor(p.tensor() + q.tensor());
      EXPECT_EQ(propagation_cache_size(), cached);
      product = DTensor(at::mm(a.tensor(), weight.tensor()));
      flat = DTensor(a.tensor().view({-1}));
      EXPECT_EQ(counter.total(), 0);
    }
    EXPECT_EQ(flat->to_local().data_ptr(), a.to_local().data_ptr());
    EXPECT_EQ(placements_to_string(partial_sum->placements()), "P(sum)");
    EXPECT_TRUE(at::equal(sum->full_tensor(), x + y)) << describe(sum->full_tensor());
    EXPECT_TRUE(at::equal(product->full_tensor(), at::mm(x, w)));
    EXPECT_TRUE(at::equal(flat->full_tensor(), x.view({-1})));
    // (1 + 10) + (2 + 10) on every element.
    EXPECT_TRUE(at::equal(partial_sum->full_tensor(), at::full({4, 3}, 23.0)));
  });
}

TEST(DTensorTest, FromLocalExplicitShape) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({5, 3});
    auto placements = parse_placements("S(0)");
    FromLocalOptions options;
    options.shape = Shape{5, 3};
    options.stride = Shape{3, 1};
    DTensor dt =
        from_local(testing::expected_local(global, mesh, placements), mesh, placements, options);
    EXPECT_EQ(dt.sizes(), (Shape{5, 3}));
    EXPECT_TRUE(at::equal(dt.to_local(), testing::expected_local(global, mesh, placements)));
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
    FromLocalOptions no_check;
    no_check.run_check = false;
    no_check.shape = Shape{5, 3};
    DTensor unchecked =
        from_local(testing::expected_local(global, mesh, placements), mesh, placements, no_check);
    EXPECT_TRUE(at::equal(unchecked.full_tensor(), global));
  });
}

TEST(DTensorTest, FromLocalRaggedLearnsUnits) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({10, 4});
    const Shape rows = {3, 0, 5, 2};
    const Shape begin = {0, 3, 3, 8};
    DTensor dt = from_local(global.narrow(0, begin[rank], rows[rank]).contiguous(), mesh,
                            parse_placements("RG(dims=1,units=[1,1,1,1])"));
    EXPECT_EQ(dt.sizes(), (Shape{10, 4}));
    ASSERT_EQ(dt.placements().size(), 1u);
    const auto* ragged = dynamic_cast<const Ragged*>(dt.placements()[0].get());
    ASSERT_NE(ragged, nullptr) << dt.placements()[0]->to_string();
    EXPECT_EQ(ragged->units(), (Shape{3, 0, 5, 2}));
    EXPECT_EQ(ragged->dims(), 1);
    EXPECT_EQ(dt.to_local().sizes().vec(), (Shape{rows[rank], 4}));
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
    // The learned layout round-trips through redistribute.
    EXPECT_TRUE(at::equal(dt.redistribute(parse_placements("R")).to_local(), global));
    DTensor even = dt.redistribute(parse_placements("S(0)"));
    EXPECT_TRUE(at::equal(even.to_local(),
                          testing::expected_local(global, mesh, parse_placements("S(0)"))));
  });
}

TEST(DTensorTest, FromLocalRaggedMergedDimsLearnsUnits) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({2, 5, 3});  // 10 rows of 3
    const Shape rows = {4, 1, 0, 5};
    const Shape begin = {0, 4, 5, 5};
    at::Tensor flat = global.reshape({10, 3});
    FromLocalOptions options;
    options.shape = Shape{2, 5, 3};
    DTensor dt = from_local(flat.narrow(0, begin[rank], rows[rank]).contiguous(), mesh,
                            parse_placements("RG(dims=2,units=[1,1,1,1])"), options);
    const auto* ragged = dynamic_cast<const Ragged*>(dt.placements()[0].get());
    ASSERT_NE(ragged, nullptr);
    EXPECT_EQ(ragged->units(), (Shape{4, 1, 0, 5}));
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
  });
}

// Runs `fn` on every rank of a 4-rank mesh and counts the ranks on which it
// threw dtensor::Error; returns the first message.
template <typename Fn>
std::pair<int, std::string> count_errors(const Shape& mesh_shape, Fn fn) {
  std::atomic<int> errors{0};
  std::mutex mutex;
  std::string message;
  int world = 1;
  for (int64_t s : mesh_shape) world *= static_cast<int>(s);
  run_ranks(world, [&](int rank) {
    DeviceMesh mesh = init_device_mesh("local", mesh_shape);
    try {
      fn(rank, mesh);
    } catch (const Error& e) {
      ++errors;
      std::lock_guard<std::mutex> lock(mutex);
      if (message.empty()) message = e.what();
    }
  });
  return {errors.load(), message};
}

TEST(DTensorTest, FromLocalRunCheckRejectsDtypeDisagreement) {
  auto [errors, message] = count_errors({4}, [](int rank, const DeviceMesh& mesh) {
    at::Tensor local = at::ones({2, 3}, rank == 2 ? at::kDouble : at::kFloat);
    from_local(local, mesh, parse_placements("S(0)"));
  });
  EXPECT_EQ(errors, 4) << message;
  EXPECT_NE(message.find("dtype"), std::string::npos) << message;
}

TEST(DTensorTest, FromLocalRejectsBadPlacements) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor local = at::ones({2, 3});
    DTENSOR_EXPECT_ERROR(from_local(local, mesh, parse_placements("S(0),R")),
                         "expected one per mesh dim");
    DTENSOR_EXPECT_ERROR(from_local(local, mesh, parse_placements("S(2)")), "tensor dim");
    DTENSOR_EXPECT_ERROR(from_local(local, mesh, parse_placements("S(-3)")), "tensor dim");
    DTENSOR_EXPECT_ERROR(distribute_tensor(local, mesh, parse_placements("RG(dims=1,units=[1,1])")),
                         "units");
    DTENSOR_EXPECT_ERROR(
        distribute_tensor(local, mesh, parse_placements("RG(dims=3,units=[1,1,1,1])")), "dims=3");
    DTENSOR_EXPECT_ERROR(distribute_tensor(local, mesh, parse_placements("R,R")),
                         "expected one per mesh dim");
    DTENSOR_EXPECT_ERROR(distribute_tensor(local, mesh, parse_placements("S(5)")), "tensor dim");
  });
}

TEST(DTensorTest, FromLocalRejectsWrongLocalShapeForGivenShape) {
  // Global [12, 3] over 4 ranks wants 3 rows each; every rank gives 2.
  auto [errors, message] = count_errors({4}, [](int /*rank*/, const DeviceMesh& mesh) {
    FromLocalOptions options;
    options.shape = Shape{12, 3};
    from_local(at::ones({2, 3}), mesh, parse_placements("S(0)"), options);
  });
  EXPECT_EQ(errors, 4) << message;
  // Trailing dims that disagree with the given shape.
  auto [errors2, message2] = count_errors({4}, [](int /*rank*/, const DeviceMesh& mesh) {
    FromLocalOptions options;
    options.shape = Shape{8, 4};
    from_local(at::ones({2, 3}), mesh, parse_placements("S(0)"), options);
  });
  EXPECT_EQ(errors2, 4) << message2;
  // A stride that is not the row-major one of the shape.
  auto [errors3, message3] = count_errors({4}, [](int /*rank*/, const DeviceMesh& mesh) {
    FromLocalOptions options;
    options.shape = Shape{8, 3};
    options.stride = Shape{1, 8};
    from_local(at::ones({2, 3}), mesh, parse_placements("S(0)"), options);
  });
  EXPECT_EQ(errors3, 4) << message3;
}

TEST(DTensorTest, FromLocalRunCheckRejectsShardsThatDoNotFitChunking) {
  // Rows 3,0,5,2 sum to 10, but S(0) of 10 over 4 is 3,3,3,1.
  auto [errors, message] = count_errors({4}, [](int rank, const DeviceMesh& mesh) {
    const Shape rows = {3, 0, 5, 2};
    from_local(at::ones({rows[rank], 3}), mesh, parse_placements("S(0)"));
  });
  EXPECT_EQ(errors, 4) << message;
}

// Arguments that disagree across ranks raise on every rank (a check failing
// on one rank alone would leave the others waiting in a collective).
TEST(DTensorTest, FromLocalRunCheckRejectsArgumentsThatDisagree) {
  auto [errors, message] = count_errors({2}, [](int rank, const DeviceMesh& mesh) {
    from_local(at::ones({2, 3}), mesh, parse_placements(rank == 0 ? "S(0)" : "R"));
  });
  EXPECT_EQ(errors, 2) << message;
  EXPECT_NE(message.find("expected the same placements on every rank"), std::string::npos)
      << message;
  auto [errors2, message2] = count_errors({2}, [](int rank, const DeviceMesh& mesh) {
    FromLocalOptions options;
    options.shape = rank == 0 ? Shape{4, 3} : Shape{3, 3};
    from_local(at::ones({2, 3}), mesh, parse_placements("S(0)"), options);
  });
  EXPECT_EQ(errors2, 2) << message2;
  EXPECT_NE(message2.find("expected the same options.shape and options.stride on every rank"),
            std::string::npos)
      << message2;
  auto [errors3, message3] = count_errors({2}, [](int rank, const DeviceMesh& mesh) {
    const Shape many(rank == 1 ? 17 : 2, 1);
    from_local(at::ones(many), mesh, parse_placements("R"));
  });
  EXPECT_EQ(errors3, 2) << message3;
  EXPECT_NE(message3.find("at most 16 dims, found 17 on mesh rank 1"), std::string::npos)
      << message3;
}

// Ragged units are learned alike on every rank, from the mesh-dim-0 group
// at coordinate 0: rows 2,1 there give units [2,1], which also split the
// second group's 2 rows as 1,1 (each rank learning from its own group made
// ranks 2 and 3 learn [1,1], and raise alone).
TEST(DTensorTest, FromLocalRaggedUnitsAreLearnedAlikeOnEveryRank) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const at::Tensor global = make_global({5, 4});
    const Shape begin = {0, 2, 3, 4}, rows = {2, 1, 1, 1};
    DTensor dt = from_local(global.narrow(0, begin[rank], rows[rank]).contiguous(), mesh,
                            parse_placements("S(0),RG(dims=1,units=[1,1])"));
    EXPECT_EQ(placements_to_string(dt.placements()), "S(0),RG(dims=1,units=[2,1])");
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
  });
}

// The brief's layout, written out: rows [0,3) and [3,4) by RG, each cut by
// S(0) into 2,1 and 1,0 rows. Learning the units from the mesh-dim-0 line at
// coordinate 0 of mesh dim 1 read rows 2,1 and refused it.
TEST(DTensorTest, FromLocalRaggedKeepsGivenUnitsWhenAnotherMeshDimSplitsTheRows) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    const at::Tensor global = make_global({4, 3});
    const Shape begin = {0, 2, 3, 4}, rows = {2, 1, 1, 0};
    const at::Tensor local = global.narrow(0, begin[rank], rows[rank]).contiguous();
    DTensor dt = from_local(local, mesh, parse_placements("RG(dims=1,units=[3,1]),S(0)"));
    EXPECT_EQ(placements_to_string(dt.placements()), "RG(dims=1,units=[3,1]),S(0)");
    EXPECT_EQ(dt.sizes(), (Shape{4, 3}));
    EXPECT_TRUE(at::equal(dt.to_local(), local));
    EXPECT_TRUE(at::equal(dt.full_tensor(), global));
  });
}

// Given units that fit are kept, with or without the global shape, for
// uneven and empty pieces and whatever splits the rows on the other mesh dim.
TEST(DTensorTest, FromLocalRaggedKeepsGivenUnitsThatFitOnTwoDimMeshes) {
  struct Layout {
    Shape shape;
    const char* placements;
  };
  const std::vector<Layout> layouts = {
      {{7, 2}, "RG(dims=1,units=[3,1]),S(0)"},
      {{5, 2}, "RG(dims=1,units=[0,2]),S(0)"},
      {{9, 2}, "RG(dims=1,units=[2,3]),SS(0,2)"},
      {{5, 3}, "S(0),RG(dims=1,units=[1,0])"},
      {{6, 2}, "RG(dims=1,units=[1,2]),RG(dims=1,units=[1,1])"},
      {{4, 5}, "RG(dims=1,units=[3,1]),S(1)"},
      {{0, 3}, "RG(dims=1,units=[3,1]),S(0)"},
      {{2, 5, 3}, "RG(dims=2,units=[3,1]),RG(dims=2,units=[1,2])"},
  };
  run_ranks(4, [&](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const Layout& layout : layouts) {
      SCOPED_TRACE(layout.placements);
      const at::Tensor global = make_global(layout.shape);
      const std::vector<PlacementPtr> placements = parse_placements(layout.placements);
      const at::Tensor local = testing::expected_local(global, mesh, placements);
      // With the shape, and on 2-D tensors also with the shape inferred.
      std::vector<FromLocalOptions> options(layout.shape.size() == 2 ? 2 : 1);
      options[0].shape = layout.shape;
      for (const FromLocalOptions& o : options) {
        DTensor dt = from_local(local, mesh, placements, o);
        EXPECT_EQ(placements_to_string(dt.placements()), layout.placements);
        EXPECT_EQ(dt.sizes(), layout.shape);
        EXPECT_TRUE(at::equal(dt.to_local(), local));
        EXPECT_TRUE(at::equal(dt.full_tensor(), global));
      }
    }
  });
}

// Units that do not fit are learned from every piece of a Ragged member, all
// the ranks that split it further included.
TEST(DTensorTest, FromLocalRaggedLearnsUnitsWhenAnotherMeshDimSplitsTheRows) {
  struct Layout {
    Shape shape;
    const char* laid_out;  // how the shards are laid out
    const char* given;     // what from_local is told
    const char* learned;
  };
  const std::vector<Layout> layouts = {
      {{4, 3},
       "RG(dims=1,units=[3,1]),S(0)",
       "RG(dims=1,units=[1,1]),S(0)",
       "RG(dims=1,units=[3,1]),S(0)"},
      {{5, 2},
       "RG(dims=1,units=[0,5]),S(0)",
       "RG(dims=1,units=[1,1]),S(0)",
       "RG(dims=1,units=[0,5]),S(0)"},
      {{10, 2},
       "RG(dims=1,units=[2,3]),SS(0,2)",
       "RG(dims=1,units=[1,1]),SS(0,2)",
       "RG(dims=1,units=[4,6]),SS(0,2)"},
      {{6, 2},
       "RG(dims=1,units=[1,2]),RG(dims=1,units=[1,1])",
       "RG(dims=1,units=[1,1]),RG(dims=1,units=[1,1])",
       "RG(dims=1,units=[2,4]),RG(dims=1,units=[1,1])"},
  };
  run_ranks(4, [&](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    for (const Layout& layout : layouts) {
      SCOPED_TRACE(layout.laid_out);
      const at::Tensor global = make_global(layout.shape);
      const at::Tensor local =
          testing::expected_local(global, mesh, parse_placements(layout.laid_out));
      DTensor dt = from_local(local, mesh, parse_placements(layout.given));
      EXPECT_EQ(placements_to_string(dt.placements()), layout.learned);
      EXPECT_TRUE(at::equal(dt.to_local(), local));
      EXPECT_TRUE(at::equal(dt.full_tensor(), global));
    }
  });
}

// Shards that no units fit raise on every rank: whatever the units, S(0)
// cuts the first Ragged member's 3 rows 2,1, not 1,2.
TEST(DTensorTest, FromLocalRaggedRejectsShardsThatNoUnitsFit) {
  auto [errors, message] = count_errors({2, 2}, [](int rank, const DeviceMesh& mesh) {
    const Shape rows = {1, 2, 1, 0};
    from_local(at::ones({rows[rank], 3}), mesh, parse_placements("RG(dims=1,units=[1,1]),S(0)"));
  });
  EXPECT_EQ(errors, 4) << message;
  EXPECT_NE(message.find("from_local: mesh rank 0 holds a local tensor of shape [1, 3]; expected "
                         "[2, 3] for "),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("RG(dims=1,units=[3,1]),S(0)"), std::string::npos) << message;
}

TEST(DTensorTest, EntryPointsRejectDTensorsAndRanksOutsideTheMesh) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    const DTensor dt = distribute_tensor(at::ones({4, 3}), mesh, parse_placements("S(0)"));
    DTENSOR_EXPECT_ERROR(distribute_tensor(dt.tensor(), mesh, parse_placements("R")),
                         "distribute_tensor: expected a plain tensor, found a DTensor laid out as");
    DTENSOR_EXPECT_ERROR(from_local(dt.tensor(), mesh, parse_placements("R")),
                         "from_local: expected a plain tensor");
    DeviceMesh half(local_world(), {2}, {"x"}, {0, 1});
    if (rank < 2) return;
    DTENSOR_EXPECT_ERROR(distribute_tensor(at::ones({4}), half, parse_placements("S(0)")),
                         "distribute_tensor: expected the calling rank (world rank " +
                             std::to_string(rank) +
                             ") to be in DeviceMesh((x=2), ranks=[0, 1]), found it outside");
    DTENSOR_EXPECT_ERROR(ones({4}, half, parse_placements("R")),
                         "DTensor: expected the calling rank");
    DTENSOR_EXPECT_ERROR(rand({4}, half, parse_placements("R"), 1),
                         "distribute_tensor: expected the calling rank");
    DTENSOR_EXPECT_ERROR(from_local(at::ones({2}), half, parse_placements("S(0)")),
                         "from_local: expected the calling rank");
  });
}

TEST(DTensorTest, FactoriesHonourRequiresGrad) {
  run_ranks(2, [](int) {
    DeviceMesh mesh = init_device_mesh("local", {2});
    const at::TensorOptions grad = at::TensorOptions().requires_grad(true);
    EXPECT_TRUE(ones({4}, mesh, parse_placements("S(0)"), grad).tensor().requires_grad());
    EXPECT_TRUE(randn({4}, mesh, parse_placements("S(0)"), 7, grad).tensor().requires_grad());
    EXPECT_FALSE(zeros({4}, mesh, parse_placements("S(0)")).tensor().requires_grad());
  });
}

TEST(DTensorTest, ConstructorRejectsWrongLocal) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    auto spec = std::make_shared<const DTensorSpec>(mesh, parse_placements("S(0)"), Shape{5, 3},
                                                    at::kFloat);
    const Shape rows = {2, 2, 1, 0};
    DTensor ok(at::zeros({rows[rank], 3}), spec);
    EXPECT_EQ(ok.to_local().sizes().vec(), (Shape{rows[rank], 3}));
    EXPECT_THROW(DTensor(at::zeros({rows[rank], 3}, at::kDouble), spec), Error);
    EXPECT_THROW(DTensor(at::zeros({rows[rank] + 1, 3}), spec), Error);
    EXPECT_THROW(DTensor(at::zeros({rows[rank], 4}), spec), Error);
  });
}

TEST(DTensorTest, SpecBasics) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    DTensorSpec spec(mesh, parse_placements("S(0),R"), Shape{8, 6}, at::kFloat);
    EXPECT_EQ(spec.stride(), (Shape{6, 1}));
    EXPECT_EQ(spec.numel(), 48);
    EXPECT_EQ(spec.local_layout().local_shape, (Shape{4, 6}));
    EXPECT_FALSE(spec.has_partial());
    EXPECT_TRUE(spec.with_placements(parse_placements("P(sum),R")).has_partial());
    EXPECT_EQ(spec, DTensorSpec(mesh, parse_placements("S(-2),R"), Shape{8, 6}, at::kFloat));
    EXPECT_NE(spec, DTensorSpec(mesh, parse_placements("S(1),R"), Shape{8, 6}, at::kFloat));
    EXPECT_EQ(spec.layout_at({1, 0}).global_offset, (Shape{4, 0}));
    EXPECT_THROW(DTensorSpec(mesh, parse_placements("S(0)"), Shape{8, 6}, at::kFloat), Error);
  });
}

TEST(DTensorTest, SpecRejectsRaggedMergingDifferentDims) {
  // Both orders: Ragged placements must all merge the same leading dims.
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    DTENSOR_EXPECT_ERROR(
        DTensorSpec(mesh, parse_placements("RG(dims=2,units=[1,1]),RG(dims=1,units=[1,1])"),
                    Shape{4, 4, 2}, at::kFloat),
        "merge the same leading dims");
    DTENSOR_EXPECT_ERROR(
        DTensorSpec(mesh, parse_placements("RG(dims=1,units=[1,1]),RG(dims=2,units=[1,1])"),
                    Shape{4, 4, 2}, at::kFloat),
        "merge the same leading dims");
    DTENSOR_EXPECT_ERROR(
        distribute_tensor(make_global({4, 4, 2}), mesh,
                          parse_placements("RG(dims=1,units=[1,1]),RG(dims=3,units=[1,1])")),
        "merge the same leading dims");
  });
}

// ---------------------------------------------------------------------------
// Partial targets

TEST(DTensorTest, RedistributeRefusesPartialTarget) {
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({5, 3});
    DTensor rep = distribute_tensor(global, mesh, parse_placements("R"));
    DTENSOR_EXPECT_ERROR(rep.redistribute(parse_placements("P(sum)")), "Partial");
    DTensor shard = distribute_tensor(global, mesh, parse_placements("S(0)"));
    DTENSOR_EXPECT_ERROR(shard.redistribute(parse_placements("P(sum)")), "Partial");
    DTensor max = distribute_tensor(global, mesh, parse_placements("P(max)"));
    DTENSOR_EXPECT_ERROR(max.redistribute(parse_placements("P(sum)")), "Partial");
    // Already that Partial: allowed, and nothing moves.
    DTensor sum = distribute_tensor(global, mesh, parse_placements("P(sum)"));
    DTensor same = sum.redistribute(parse_placements("P(sum)"));
    EXPECT_TRUE(at::equal(same.to_local(), sum.to_local()));
    EXPECT_TRUE(at::equal(same.full_tensor(), global));
  });
  run_ranks(4, [](int /*rank*/) {
    DeviceMesh mesh = init_device_mesh("local", {2, 2});
    at::Tensor global = make_global({4, 3});
    DTensor dt = distribute_tensor(global, mesh, parse_placements("P(sum),R"));
    DTENSOR_EXPECT_ERROR(dt.redistribute(parse_placements("P(sum),P(sum)")), "Partial");
    DTensor kept = dt.redistribute(parse_placements("P(sum),S(0)"));
    EXPECT_TRUE(at::equal(kept.to_local(),
                          testing::expected_local(global, mesh, parse_placements("P(sum),S(0)"))));
    EXPECT_TRUE(at::equal(kept.full_tensor(), global));
  });
}

TEST(DTensorTest, RedistributeAnyToPartial) {
  run_ranks(4, [](int rank) {
    DeviceMesh mesh = init_device_mesh("local", {4});
    at::Tensor global = make_global({5, 3});
    DTensor rep = distribute_tensor(global, mesh, parse_placements("R"));
    DTensor sum = redistribute_any(rep, parse_placements("P(sum)"));
    EXPECT_TRUE(sum.placements()[0]->is_partial());
    EXPECT_TRUE(at::equal(sum.to_local(), rank == 0 ? global : at::zeros_like(global)))
        << describe(sum.to_local());
    EXPECT_TRUE(at::equal(sum.full_tensor(), global));
    DTensor max = redistribute_any(rep, parse_placements("P(max)"));
    EXPECT_TRUE(at::equal(max.to_local(), global));
    EXPECT_TRUE(at::equal(max.full_tensor(), global));
    DTensor shard = distribute_tensor(global, mesh, parse_placements("S(0)"));
    DTensor from_shard = redistribute_any(shard, parse_placements("P(sum)"));
    EXPECT_TRUE(at::equal(from_shard.full_tensor(), global));
  });
}

// sum_over_mesh adds every rank's value over the mesh's ranks (all of a 2-D
// mesh; one group of a sliced dim), with one counted all_reduce.
TEST(DTensorTest, SumOverMeshAddsEveryRanksValue) {
  run_ranks(4, [](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    CollectiveCounter counter;
    EXPECT_EQ(sum_over_mesh(mesh, rank + 1), 10);
    EXPECT_EQ(counter.total(), 1);
    EXPECT_EQ(counter.by_collective().count("all_reduce"), 1u);
    // tp groups: world ranks {0, 1} and {2, 3}.
    EXPECT_EQ(sum_over_mesh(mesh["tp"], rank + 1), rank < 2 ? 3 : 7);
    EXPECT_EQ(sum_over_mesh(mesh, int64_t{1} << 40), int64_t{4} << 40);
    // A mesh over ranks 3 and 1: the others are refused, naming it.
    const DeviceMesh some(local_world(), {2}, {"x"}, {3, 1});
    if (rank == 1 || rank == 3) {
      EXPECT_EQ(sum_over_mesh(some, rank), 4);
    } else {
      DTENSOR_EXPECT_ERROR(sum_over_mesh(some, rank),
                           "sum_over_mesh: expected a rank of DeviceMesh((x=2), ranks=[3, 1])");
    }
  });
}

}  // namespace
}  // namespace dtensor
