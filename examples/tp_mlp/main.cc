// Copyright 2026 The dtensor Authors.
//
// tp_mlp: the README's main job. Trains a two-layer MLP with tensor
// parallelism (and its sequence-parallel variant) on 4 ranks of the
// in-process `local` backend, and prints each step's loss beside the same
// training on one device. Exits 1 if they disagree.
#include <atomic>
#include <cstdio>

#include <dtensor/mesh/local_communicator.h>
#include "examples/support/one_device.h"
#include "examples/tp_mlp/tp_mlp.h"

namespace {

// On gradients and updated parameters.
constexpr double kDiffTolerance = 1e-4;

}  // namespace

int main() {
  std::atomic<bool> agree{true};
  dtensor::run_ranks(4, [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {4}, {"tp"});
    for (bool sequence_parallel : {false, true}) {
      dtensor::examples::TpMlpOptions options;
      options.sequence_parallel = sequence_parallel;
      const auto steps = dtensor::examples::train_tp_mlp(mesh, options);
      if (rank != 0) continue;
      std::printf("%s MLP on %s\n", sequence_parallel ? "sequence-parallel" : "tensor-parallel",
                  mesh.to_string().c_str());
      for (size_t i = 0; i < steps.size(); ++i) {
        const auto& s = steps[i];
        std::printf(
            "  step %zu: loss %.6f (one device %.6f)  max |grad diff| %.2e  output [%s]  "
            "w1.grad [%s]\n",
            i, s.loss, s.reference_loss, s.max_grad_diff, s.output_placements.c_str(),
            s.weight_grad_placements.c_str());
        if (!dtensor::examples::step_agrees(s, kDiffTolerance)) agree = false;
      }
    }
  });
  std::printf(agree ? "distributed training matches one device\n"
                    : "MISMATCH between distributed and one-device training\n");
  return agree ? 0 : 1;
}
