// Copyright 2026 The dtensor Authors.
//
// FSDP over tensor parallelism (examples/fsdp_tp): the StridedShard storage
// layout is "TP first, then FSDP", and training on a (dp=2, tp=2) mesh with
// each dp rank on its own rows of the batch equals training on one device.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include "examples/fsdp_tp/fsdp_tp.h"

namespace dtensor {
namespace {

using examples::FsdpTpOptions;
using examples::ParameterPlacements;

// What FSDP + TP stores on rank (dp, tp), sliced by hand on one device: the
// tp piece first, then its dp piece (torch.chunk at both levels).
at::Tensor tp_then_fsdp_piece(const at::Tensor& t, int64_t dim, int64_t dp, int64_t tp) {
  return t.chunk(2, dim)[tp].chunk(2, dim)[dp];
}

TEST(FsdpTpTest, StridedShardHoldsEachTpPieceShardedOverDp) {
  // Hidden 10: tp pieces of 5, each split 3 + 2 over dp.
  const std::vector<PlacementPtr> fsdp_tp = parse_placements("SS(0,2),S(0)");
  const std::vector<std::vector<int64_t>> rows_by_rank = {{0, 1, 2}, {5, 6, 7}, {3, 4}, {8, 9}};
  for (int64_t dp = 0; dp < 2; ++dp) {
    for (int64_t tp = 0; tp < 2; ++tp) {
      EXPECT_EQ(compute_local_layout({10, 6}, {2, 2}, {dp, tp}, fsdp_tp).global_indices()[0],
                rows_by_rank[2 * dp + tp]);
    }
  }
  // A plain Shard on dp would hand rank (dp=0, tp=1) the rows 3, 4 instead.
  EXPECT_EQ(compute_local_layout({10, 6}, {2, 2}, {0, 1}, parse_placements("S(0),S(0)"))
                .global_indices()[0],
            (std::vector<int64_t>{3, 4}));
}

TEST(FsdpTpTest, LayoutsAreFsdp2OverTp) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    const char* expected_storage[2][4] = {
        {"SS(0,2),S(0)", "SS(0,2),S(0)", "S(0),S(1)", "S(0),R"},
        {"SS(0,2),S(0)", "SS(0,2),S(0)", "SS(1,2),S(1)", "S(0),R"}};
    const char* expected_compute[4] = {"R,S(0)", "R,S(0)", "R,S(1)", "R,R"};
    for (bool fsdp_shards_tp_dim : {false, true}) {
      FsdpTpOptions options;
      options.fsdp_shards_tp_dim = fsdp_shards_tp_dim;
      const auto layouts = examples::fsdp_tp_layouts(mesh, options);
      for (size_t i = 0; i < layouts.size(); ++i) {
        EXPECT_EQ(placements_to_string(layouts[i].storage),
                  expected_storage[fsdp_shards_tp_dim][i]);
        EXPECT_EQ(placements_to_string(layouts[i].compute), expected_compute[i]);
      }
    }
  });
}

TEST(FsdpTpTest, StoredShardsAreTpPiecesShardedOverDp) {
  run_ranks(4, [](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    const int64_t dp = mesh.coordinate()[0], tp = mesh.coordinate()[1];
    FsdpTpOptions options;
    options.fsdp_shards_tp_dim = true;
    const auto layouts = examples::fsdp_tp_layouts(mesh, options);
    const examples::MlpParameters init =
        examples::initial_mlp_parameters(options.shape, mesh.device());
    // w1 [10, 6] and w2 [4, 10]: TP splits dim 0 and dim 1, FSDP the same dim.
    const int64_t tp_dims[2] = {0, 1};
    const size_t weights[2] = {0, 2};
    for (size_t j = 0; j < 2; ++j) {
      const at::Tensor& w = init[weights[j]];
      const at::Tensor local = distribute_tensor(w, mesh, layouts[weights[j]].storage).to_local();
      EXPECT_TRUE(at::equal(local, tp_then_fsdp_piece(w, tp_dims[j], dp, tp)))
          << "weight " << examples::kMlpParameterNames[weights[j]] << " rank (" << dp << ", " << tp
          << ")";
    }
  });
}

void expect_all(const ParameterPlacements& got, const ParameterPlacements& expected) {
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i], expected[i]) << examples::kMlpParameterNames[i];
  }
}

void expect_trains_like_one_device(bool fsdp_shards_tp_dim, const ParameterPlacements& storage) {
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2}, {"dp", "tp"});
    FsdpTpOptions options;
    options.fsdp_shards_tp_dim = fsdp_shards_tp_dim;
    const auto steps = examples::train_fsdp_tp(mesh, options);
    ASSERT_EQ(steps.size(), 4u);
    const at::Tensor x = examples::mlp_input(options.shape, mesh.device());
    const int64_t rows_per_dp_rank = options.shape.batch / 2;
    const int64_t dp = mesh.coordinate()[0];
    for (const examples::FsdpTpStep& step : steps) {
      EXPECT_NEAR(step.loss, step.reference_loss, 1e-5);
      EXPECT_LT(step.max_grad_diff, 1e-5);
      EXPECT_LT(step.max_param_diff, 1e-5);
      // Stored fully sharded, gathered over dp only for compute, and the
      // gradients reduce-scattered back onto the storage layout.
      expect_all(step.storage_placements, storage);
      expect_all(step.grad_placements, storage);
      expect_all(step.compute_placements, {"R,S(0)", "R,S(0)", "R,S(1)", "R,R"});
      // Each dp rank's gradient covers its own rows only: a pending sum over dp.
      expect_all(step.compute_grad_placements,
                 {"P(sum),S(0)", "P(sum),S(0)", "P(sum),S(1)", "P(sum),R"});
      // Each dp rank trained on its own half of the batch.
      EXPECT_EQ(step.input_offset, dp * rows_per_dp_rank);
      EXPECT_TRUE(
          at::equal(step.local_input, x.narrow(0, dp * rows_per_dp_rank, rows_per_dp_rank)));
    }
    EXPECT_GT(steps.front().loss - steps.back().loss, 1e-3);  // it did train
  });
}

TEST(FsdpTpTest, TrainsLikeOneDevice) {
  expect_trains_like_one_device(false, {"SS(0,2),S(0)", "SS(0,2),S(0)", "S(0),S(1)", "S(0),R"});
}

TEST(FsdpTpTest, ShardingTheTpDimTrainsLikeOneDevice) {
  expect_trains_like_one_device(true, {"SS(0,2),S(0)", "SS(0,2),S(0)", "SS(1,2),S(1)", "S(0),R"});
}

}  // namespace
}  // namespace dtensor
