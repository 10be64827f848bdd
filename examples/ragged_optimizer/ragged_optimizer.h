// Copyright 2026 The dtensor Authors.
//
// examples/ragged_optimizer/ragged_optimizer.h: a Muon-style optimizer whose
// update is a whole-matrix function, run on sharded parameters by moving
// each matrix whole onto one owner rank with a one-hot Ragged placement.
//
// Parameters of different shapes live as Shard(0) or Replicate on a 1-D mesh.
// Each step computes gradients by autograd, keeps a momentum buffer in the
// parameter's own layout (elementwise), and then, per parameter:
//   1. redistributes the momentum to RG(dims=1, units=[0,..,rows,..,0]): every
//      row on the owner (owners round-robin), 0-row shards elsewhere;
//   2. orthogonalizes it on the owner with Newton-Schulz
//      (newton_schulz.h), which needs the whole matrix;
//   3. redistributes the result back to the parameter's layout and applies it.
// Every rank owns some matrices, so the matrix work is spread without ever
// replicating it. Checked against the same optimizer on one device.
// Run: `./build/examples/ragged_optimizer` (4 ranks of the local backend).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placement.h>

namespace dtensor::examples {

struct MatrixParameter {
  std::vector<int64_t> shape;
  std::string placements;  // on the 1-D mesh: "S(0)" or "R"
};

struct RaggedOptimizerOptions {
  // 5 rows over 4 ranks shard 2,2,1,0: uneven, with an empty shard.
  std::vector<MatrixParameter> parameters = {
      {{6, 4}, "S(0)"}, {{5, 5}, "S(0)"}, {{8, 3}, "R"}, {{4, 4}, "R"}};
  int64_t steps = 3;
  int64_t newton_schulz_iterations = 5;
  double learning_rate = 0.05;
  double momentum = 0.9;
};

// What one step did with one parameter, seen from the calling rank.
struct WholeMatrixUpdate {
  int64_t owner = 0;
  std::string whole_placements;            // the one-hot Ragged, e.g. "RG(dims=1,units=[0,5,0,0])"
  std::vector<int64_t> whole_local_shape;  // this rank's shard of it: [rows, cols] or [0, cols]
  std::string update_placements;           // the update, back in the parameter's layout
  int64_t collectives_to_owner = 0;        // redistributes into and out of the Ragged layout
  int64_t collectives_back = 0;
  double max_param_diff = 0;  // |parameter - one device| after the update
};

struct RaggedOptimizerStep {
  double loss = 0;                         // distributed
  double reference_loss = 0;               // one device
  std::vector<WholeMatrixUpdate> updates;  // one per parameter
};

// The one-hot Ragged placement putting all `rows` on coordinate `owner` of a
// mesh dim of `n` ranks.
PlacementPtr whole_on_rank(int64_t rows, int64_t owner, int64_t n);

// Trains `options.parameters` on `mesh` (1-D) and on one device. Collective:
// every rank of the mesh calls it.
std::vector<RaggedOptimizerStep> run_ragged_optimizer(const DeviceMesh& mesh,
                                                      const RaggedOptimizerOptions& options);

}  // namespace dtensor::examples
