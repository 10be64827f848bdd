// Copyright 2026 The dtensor Authors.
//
// The Ragged whole-matrix optimizer (examples/ragged_optimizer): every
// parameter's momentum moves whole onto its owner as a one-hot Ragged, the
// owner alone orthogonalizes it, and the parameters end up equal to the same
// optimizer on one device.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include "examples/ragged_optimizer/newton_schulz.h"
#include "examples/ragged_optimizer/ragged_optimizer.h"

namespace dtensor {
namespace {

using examples::RaggedOptimizerOptions;

TEST(RaggedOptimizerTest, OrthogonalizationNeedsTheWholeMatrix) {
  // Full rank 4, singular values spread apart.
  const at::Tensor m =
      at::arange(24, at::kFloat).mul(0.37).sin().reshape({6, 4}) + at::eye(6, 4) * 0.5;
  const at::Tensor whole = examples::newton_schulz_orthogonalize(m, 5);
  // Every singular value pushed into Muon's band around 1.
  const at::Tensor singular = at::linalg_svdvals(m);
  const at::Tensor pushed = at::linalg_svdvals(whole);
  EXPECT_GT(singular.max().item<double>() / singular.min().item<double>(), 3) << singular;
  EXPECT_GT(pushed.min().item<double>(), 0.6) << pushed;
  EXPECT_LT(pushed.max().item<double>(), 1.25) << pushed;
  // Row shards orthogonalized apart are something else entirely.
  std::vector<at::Tensor> pieces;
  for (const at::Tensor& rows : m.chunk(4, 0)) {
    pieces.push_back(examples::newton_schulz_orthogonalize(rows, 5));
  }
  EXPECT_GT((at::cat(pieces, 0) - whole).abs().max().item<double>(), 0.1);
}

TEST(RaggedOptimizerTest, WholeOnRankPutsEveryRowOnTheOwner) {
  const PlacementPtr p = examples::whole_on_rank(5, 1, 4);
  EXPECT_EQ(p->to_string(), "RG(dims=1,units=[0,5,0,0])");
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(compute_local_layout({5, 3}, {4}, {r}, {p}).local_shape,
              (std::vector<int64_t>{r == 1 ? 5 : 0, 3}));
  }
}

TEST(RaggedOptimizerTest, MatchesOneDevice) {
  const RaggedOptimizerOptions options;
  // Owners round-robin: parameter i on rank i.
  const char* whole_placements[4] = {"RG(dims=1,units=[6,0,0,0])", "RG(dims=1,units=[0,5,0,0])",
                                     "RG(dims=1,units=[0,0,8,0])", "RG(dims=1,units=[0,0,0,4])"};
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const auto steps = examples::run_ragged_optimizer(mesh, options);
    ASSERT_EQ(steps.size(), 3u);
    for (const examples::RaggedOptimizerStep& step : steps) {
      EXPECT_NEAR(step.loss, step.reference_loss, 1e-4);
      ASSERT_EQ(step.updates.size(), 4u);
      for (size_t i = 0; i < step.updates.size(); ++i) {
        SCOPED_TRACE(::testing::Message() << "parameter " << i << " rank " << rank);
        const examples::WholeMatrixUpdate& u = step.updates[i];
        const examples::MatrixParameter& p = options.parameters[i];
        EXPECT_EQ(u.owner, static_cast<int64_t>(i));
        EXPECT_EQ(u.whole_placements, whole_placements[i]);
        // The owner holds the whole matrix, everyone else a 0-row shard.
        const std::vector<int64_t> held = {rank == u.owner ? p.shape[0] : 0, p.shape[1]};
        EXPECT_EQ(u.whole_local_shape, held);
        EXPECT_EQ(u.update_placements, p.placements);
        // Into the Ragged: one all-to-all from Shard(0), a local slice from
        // Replicate; back: one collective either way.
        EXPECT_EQ(u.collectives_to_owner, p.placements == "R" ? 0 : 1);
        EXPECT_EQ(u.collectives_back, 1);
        EXPECT_LT(u.max_param_diff, 1e-5);
      }
    }
    EXPECT_GT(steps.front().loss - steps.back().loss, 1e-2);  // it did optimize
  });
}

}  // namespace
}  // namespace dtensor
